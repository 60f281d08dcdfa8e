//! Incremental refreshes with every patchable profile on (Signmap, OCX, CDIF lists, DiWoo;
//! issue 30, point 5): the profiles' files are patched from the published ones and the changed
//! records, and come out byte for byte as a render of every stored record would make them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oai_bridge::{Job, Limits, OcxConfig, Policy, Profile, ProfileSettings, TypeMap, fields_for};

use crate::faults::{job, snapshot};
use crate::incremental::{edit_a_lastmod, export_job, folders};
use crate::server::{TestRecord, TestServer};

/// The ledger the profiles' patch reads, published beside their files.
const LEDGER: &str = ".oai-bridge-ledger";

/// Every patchable profile on, with shards of a few entries so that a change moves entries
/// from shard to shard: 20, so that a file of the Signmap or OCX with one entry that lost to
/// another record's of the same landing page has it blanked out, with two is cut again.
fn profiles_job(server: &TestServer) -> Job {
    let ocx = OcxConfig {
        types: TypeMap::with(&[("Lesplan".into(), "http://oerschema.org/Lesson".into())]).unwrap(),
        ..OcxConfig::default()
    };
    let profiles = ProfileSettings {
        signmap: true,
        ocx: Some(ocx),
        cdif: false,
        cdif_list: true,
        diwoo: vec![("a".into(), 1), ("b".into(), 4)],
    };
    let mut job = job(server);
    // The Dublin Core fields the profiles read, as the commands ask for them.
    job.request.fields = fields_for(&profiles, &job.landing, &job.request.source);
    Job {
        limits: Limits {
            max_urls: 20,
            ..Limits::default()
        },
        profiles,
        ..job
    }
}

/// A small deterministic generator (xorshift), so that a failing seed can be run again.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Record `key` in its version `version`, shaped by both: with or without a landing page, a
/// content file, a collection page several records give (the landing page of a record without
/// one of its own), an OCX type, and sets of the DiWoo categories or none.
fn record(key: &str, version: u64, date: &str) -> TestRecord {
    let shape = version.wrapping_mul(0x9E37_79B9) ^ key.len() as u64;
    let mut r = TestRecord::new(&format!("oai:test:{key}"), date)
        .title(&format!("Record {key} v{version}"));
    if !shape.is_multiple_of(7) {
        r = r.url(&format!("https://repo.example/record/{key}"));
    } else {
        // No landing page inside the scope: counted, not published by the Signmap.
        r = r.url(&format!("urn:nbn:test:{key}"));
    }
    if shape.is_multiple_of(3) {
        r = r.url(&format!("https://repo.example/files/{key}-{version}.pdf"));
    }
    if shape.is_multiple_of(5) {
        r = r.url(&format!("https://repo.example/collections/{}", shape % 4));
    }
    if shape.is_multiple_of(2) {
        r = r.kind("Lesplan");
    }
    for (bit, set) in [(1, "a"), (2, "b:sub"), (4, "c")] {
        if (shape >> 3) & bit != 0 {
            r = r.set(set);
        }
    }
    r
}

/// The repository's records, by key.
type Repository = BTreeMap<String, (u64, String)>;

fn records(repository: &Repository) -> Vec<TestRecord> {
    repository
        .iter()
        .map(|(key, (version, date))| record(key, *version, date))
        .collect()
}

/// Changes a tenth to a third of the records at random: a new version (a new datestamp, and
/// with it maybe another shape), a deletion, or a new record (between existing keys too).
fn change(repository: &mut Repository, rng: &mut Rng, day: u32) -> Vec<TestRecord> {
    let date = format!("2024-06-{day:02}");
    let keys: Vec<String> = repository.keys().cloned().collect();
    let count = keys.len() as u64 / 10 + rng.below(keys.len() as u64 / 4 + 1);
    let mut deleted = Vec::new();
    for _ in 0..count {
        let key = &keys[rng.below(keys.len() as u64) as usize];
        match rng.below(4) {
            0 => {
                if repository.remove(key).is_some() {
                    deleted.push(TestRecord::new(&format!("oai:test:{key}"), &date).deleted());
                }
            }
            1 => {
                let new = format!("{key}x{}", rng.below(100));
                repository.insert(new, (rng.below(1000), date.clone()));
            }
            _ => {
                if let Some(entry) = repository.get_mut(key) {
                    *entry = (entry.0 + 1 + rng.below(5), date.clone());
                }
            }
        }
    }
    let mut all = records(repository);
    all.extend(deleted);
    all
}

/// The files of `out` but the sitemap's, whose shards a patch keeps in their ranges where a
/// render from nothing packs them anew, and the ledger, which names them.
fn profile_files(out: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = snapshot(out);
    files
        .retain(|name, _| !name.starts_with("sitemap-") && name != "sitemap.xml" && name != LEDGER);
    files
}

fn assert_same(patched: &BTreeMap<String, Vec<u8>>, whole: &BTreeMap<String, Vec<u8>>, what: &str) {
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(patched), names(whole), "{what}: the files differ");
    let differ: Vec<&String> = (patched.iter())
        .filter(|(name, bytes)| *bytes != &whole[*name])
        .map(|(name, _)| name)
        .collect();
    // The ledger is binary past its first lines: shown only when nothing else differs.
    let shown = differ
        .iter()
        .find(|n| n.as_str() != LEDGER)
        .or(differ.first());
    if let Some(name) = shown {
        let text = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(4000)]).into_owned();
        panic!(
            "{what}: {differ:?} differ; {name}:\npatched:\n{}\nwhole:\n{}",
            text(&patched[*name]),
            text(&whole[*name])
        );
    }
}

/// A repository published in full through a store, with every patchable profile.
struct Published {
    server: TestServer,
    _root: tempfile::TempDir,
    out: PathBuf,
    state: PathBuf,
    job: Job,
    full: oai_bridge::ExportSummary,
}

impl Published {
    async fn new(repository: &Repository) -> Self {
        let server = TestServer::builder(records(repository))
            .page_size(25)
            .start();
        let (_root, out, state) = folders();
        let job = profiles_job(&server);
        let full = export_job(job.clone(), &out, Some(&state), Policy::default())
            .await
            .unwrap();
        Self {
            server,
            _root,
            out,
            state,
            job,
            full,
        }
    }

    /// The upstream changed at random (`day` of June): its records after.
    fn change(&self, repository: &mut Repository, rng: &mut Rng, day: u32) {
        self.server.set_records(change(repository, rng, day));
        self.server
            .set_response_date(&format!("2024-06-{:02}T08:00:00Z", day + 1));
    }

    /// The next refresh, through the store; the shrink guard does not stop a random change.
    async fn refresh(&self) -> oai_bridge::ExportSummary {
        let accept = Policy {
            accept_shrink: true,
            ..Policy::default()
        };
        export_job(self.job.clone(), &self.out, Some(&self.state), accept)
            .await
            .unwrap()
    }

    /// The profiles' files of an export from nothing of the repository as it is now.
    async fn afresh(&self) -> BTreeMap<String, Vec<u8>> {
        let (_root, out, state) = folders();
        export_job(self.job.clone(), &out, Some(&state), Policy::default())
            .await
            .unwrap();
        profile_files(&out)
    }
}

/// Random changes, refreshed incrementally twice (the second patch starts from the first's
/// files and ledger): each refresh gives the bytes of a render of every stored record (the
/// same store made to render whole, ledger and counts included), and the profiles' files of an
/// export from nothing of the same repository; most are patched (a refresh in which a record
/// whose entries lost to another's of the same landing page comes to win it renders whole).
#[tokio::test]
async fn a_patch_of_every_profile_gives_the_bytes_of_a_whole_render() {
    let (mut refreshes, mut patches) = (0, 0);
    for seed in 1..=8u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let mut repository: Repository = (0..60 + rng.below(60))
            .map(|i| {
                (
                    format!("{i:03}"),
                    (rng.below(1000), "2024-05-01".to_owned()),
                )
            })
            .collect();
        let p = Published::new(&repository).await;
        let profiles = &p.full.built.profiles;
        let signmap = profiles.iter().any(|p| p.profile() == Profile::Signmap);
        let ocx = profiles.iter().any(|p| p.profile() == Profile::Ocx);
        assert!(signmap && ocx, "seed {seed}");
        assert!(p.out.join(LEDGER).exists(), "seed {seed}: no ledger");
        for (round, day) in [(1, 2), (2, 3)] {
            let what = format!("seed {seed}, refresh {round}");
            p.change(&mut repository, &mut rng, day);
            let patched = p.refresh().await;
            let kind = patched.run.as_ref().unwrap().kind;
            assert_eq!(kind, oai_bridge::Kind::Incremental, "{what}");
            // Patched, not rendered whole: a patch reads no record but the changed ones, and
            // so has no examples of what it does not publish.
            refreshes += 1;
            patches += usize::from(patched.built.samples.is_none());
            let files = snapshot(&p.out);

            // The same store rendered whole: without the ledger, nothing is patched.
            std::fs::remove_file(p.out.join(LEDGER)).unwrap();
            let whole = p.refresh().await;
            assert!(whole.built.samples.is_some(), "{what}: patched, no ledger");
            assert_same(&files, &snapshot(&p.out), &what);
            // The landing-page profiles' counts and DiWoo's, with their indexes.
            let (patched, whole) = (&patched.built.profiles, &whole.built.profiles);
            assert_eq!(patched, whole, "{what}: counts");

            // An export from nothing of the same repository: the same profiles' files.
            assert_same(&profile_files(&p.out), &p.afresh().await, &what);
        }
    }
    assert!(
        patches * 4 >= refreshes * 3,
        "{patches} of {refreshes} refreshes patched"
    );
}

/// A profile file edited since it was published is never the base of a patch: the refresh
/// renders every record, and the edit is gone.
#[tokio::test]
async fn an_edited_profile_file_is_not_patched_but_rendered_whole() {
    let mut rng = Rng(7);
    let mut repository: Repository = (0..60)
        .map(|i| (format!("{i:03}"), (i, "2024-05-01".to_owned())))
        .collect();
    let p = Published::new(&repository).await;
    edit_a_lastmod(&p.out.join("signmap-2.xml"));
    p.change(&mut repository, &mut rng, 2);
    let second = p.refresh().await;
    assert!(
        second.built.samples.is_some(),
        "patched from an edited file"
    );
    assert_same(&profile_files(&p.out), &p.afresh().await, "after an edit");
}

/// A ledger of other columns than this version's (written by a version with a profile fed by
/// the records added or removed since) is never the base of a patch: the refresh renders every
/// record, and publishes a ledger of this version's columns.
#[tokio::test]
async fn a_ledger_of_other_columns_is_not_patched_but_rendered_whole() {
    let mut rng = Rng(7);
    let mut repository: Repository = (0..60)
        .map(|i| (format!("{i:03}"), (i, "2024-05-01".to_owned())))
        .collect();
    let p = Published::new(&repository).await;
    let ledger = p.out.join(LEDGER);
    let listed = r#""columns":["signmap","ocx","cdif"]"#;
    let other = r#""columns":["signmap","ocx","cdif","new"]"#;
    let bytes = std::fs::read(&ledger).unwrap();
    // Its head's JSON is the second line; the checksum of all before it is its last 8 bytes.
    let body = &bytes[..bytes.len() - 8];
    let text = String::from_utf8_lossy(body).into_owned();
    assert!(text.contains(listed), "the ledger lists no columns");
    let (magic, rest) = body.split_at(body.iter().position(|&b| b == b'\n').unwrap() + 1);
    let end = rest.iter().position(|&b| b == b'\n').unwrap();
    let head = std::str::from_utf8(&rest[..end])
        .unwrap()
        .replace(listed, other);
    let mut edited = [magic, head.as_bytes(), &rest[end..]].concat();
    let sum = xxhash_rust::xxh3::xxh3_64(&edited);
    edited.extend_from_slice(&sum.to_le_bytes());
    std::fs::write(&ledger, edited).unwrap();

    p.change(&mut repository, &mut rng, 2);
    let second = p.refresh().await;
    assert!(
        second.built.samples.is_some(),
        "patched from a ledger of other columns"
    );
    assert_same(
        &profile_files(&p.out),
        &p.afresh().await,
        "after other columns",
    );
    let written = String::from_utf8_lossy(&std::fs::read(&ledger).unwrap()).into_owned();
    assert!(written.contains(listed) && !written.contains(other));
}
