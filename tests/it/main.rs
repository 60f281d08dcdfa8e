//! Integration tests: one binary, a module per concern. `server` is the local OAI-PMH test
//! server (loopback, real resumption-token paging, injectable faults) the others harvest from.

mod bucket;
mod chaos;
mod check;
mod cli;
mod edges;
mod faults;
mod fence;
mod fleet;
mod fuzz_regressions;
mod golden;
mod incremental;
mod indexnow;
mod learn;
mod migrate;
mod packaging;
mod platforms;
mod postgres;
mod postgres_tls;
mod profiles_patch;
mod props;
mod secrets;
mod serve;
mod server;
mod shared;
mod structure;
