# OpenMetrics text (the gateway's /metrics) to the classic text format that `promtool check
# metrics` reads: there a counter's HELP and TYPE name its `_total` series (OpenMetrics names the
# family) and no `# EOF` ends it. Used by .ci/run and benches/fleet/run.sh.
/^# EOF$/ { next }
/^# HELP / { help = $0; next }
/^# TYPE / { if ($4 == "counter") { sub("^# HELP " $3 " ", "# HELP " $3 "_total ", help); $3 = $3 "_total" }
             if (help != "") print help; help = ""; print; next }
{ print }
