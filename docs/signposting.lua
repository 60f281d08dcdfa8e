-- FAIR Signposting Level 1 for Apache httpd (docs/discovery.md, "Apache httpd"): a fixups hook of
-- mod_lua that asks the gateway's /{name}/signposting for the Link header of the page asked for
-- and adds it to the answer, whatever serves the page (a proxied repository, or one inside
-- Apache). A page the gateway does not know gets nothing; a gateway that is down or slow adds
-- nothing and the page is served as before. Needs Debian's lua-socket (its Lua 5.3 build, the Lua
-- of Debian's mod_lua). Tested by tests/signposting/apache.sh.

-- The gateway's Level 1 endpoint for this repository.
local GATEWAY = "http://127.0.0.1:8080/r/signposting"
-- The origin the repository publishes its pages under (the Signmap's <loc>s), to which the path
-- and query asked for are appended. nil: the scheme and Host of the request (behind a TLS
-- terminator that talks plain HTTP to Apache, write "https://repository.example.edu").
local ORIGIN = nil
-- Answers kept per Lua state (LuaScope thread: one per worker thread), for TTL seconds; at MAX
-- pages the whole cache is dropped, so memory stays bounded without bookkeeping per entry.
local TTL, MAX = 600, 1000

local http = require("socket.http")
local ltn12 = require("ltn12")
-- Per socket operation (connect, send, each receive): a gateway that does not answer within
-- this costs a page one second once, then is asked again by the next page.
http.TIMEOUT = 1

local cache, cached = {}, 0

-- The gateway's Link for the landing page URL, "" for none; nil when the gateway did not answer
-- 2xx (not cached: asked again next time).
local function ask(url)
  local ok, status, headers = http.request({
    url = GATEWAY,
    headers = { ["x-signposting-url"] = url },
    sink = ltn12.sink.null(),
  })
  if not ok or type(status) ~= "number" or status < 200 or status > 299 then
    return nil
  end
  return headers["link"] or ""
end

function signposting(r)
  -- Once per request from a client: not for sub-requests (mod_dir's, SSI's), and not again
  -- after an internal redirect (err_headers_out, set below, is carried over).
  if not r.is_initial_req or (r.method ~= "GET" and r.method ~= "HEAD") then
    return apache2.DECLINED
  end
  local origin = ORIGIN or ((r.is_https and "https" or "http") .. "://" .. r.hostname)
  local url = origin .. r.unparsed_uri
  local now = os.time()
  local hit = cache[url]
  local link
  if hit and hit.until_ > now then
    link = hit.link
  else
    link = ask(url)
    if link then
      if cached >= MAX then
        cache, cached = {}, 0
      end
      if not hit then
        cached = cached + 1
      end
      cache[url] = { link = link, until_ = now + TTL }
    end
  end
  -- err_headers_out: sent with every status, and kept when mod_proxy replaces headers_out with
  -- the backend's.
  if link and link ~= "" then
    r.err_headers_out["Link"] = link
  end
  return apache2.DECLINED
end
