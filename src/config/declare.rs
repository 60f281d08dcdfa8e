//! The machinery behind the declarations of `config::keys`: what a declared key is
//! ([`Key`]), the `section!` macro that turns a section's table into its raw serde struct, its
//! overrides, its flags and its validated struct, and the types those share: where a value
//! was given ([`Origin`], [`Given`]), the environment ([`Environment`]), the flags of a command
//! (`keys::Flags`), the overrides of one layer (`keys::Overrides`). Read `keys.rs` for the settings;
//! this file only when the shape of a declaration changes.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::ConfigError;

/// The commands that read settings from the environment and flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommandName {
    /// `serve`.
    Serve,
    /// `export`.
    Export,
    /// `check`.
    Check,
    /// `prune`.
    Prune,
    /// `migrate-state`.
    Migrate,
}

/// Where an override was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// An environment variable, e.g. `OAI_BRIDGE_USER_AGENT`.
    Env(&'static str),
    /// A command-line flag or argument, e.g. `--max-attempts`.
    Flag(&'static str),
}

impl Origin {
    /// The error of a value given here: `environment: VARIABLE: ...` or
    /// `command line: --flag: ...`.
    pub(crate) fn error(self, message: impl Into<String>) -> ConfigError {
        let (file, key) = match self {
            Origin::Env(variable) => ("environment", variable),
            Origin::Flag(flag) => ("command line", flag),
        };
        ConfigError {
            file: file.to_owned(),
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

/// A value an override gives, as it was given, and where.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Given<T> {
    /// The value, not yet checked.
    pub value: T,
    /// The variable or flag that gave it.
    pub origin: Origin,
}

impl<T> Given<T> {
    /// The value read by `parse`, or its error naming the variable or flag.
    pub(crate) fn parse<U>(
        &self,
        parse: impl FnOnce(&T) -> Result<U, String>,
    ) -> Result<U, ConfigError> {
        parse(&self.value).map_err(|m| self.origin.error(m))
    }
}

/// What a declared name is: a key with a value, or a table below its section
/// (`[repository.harvest]`, `[repository.ocx]`).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A key: `bridge.toml` shows it and `docs/configuration.md` describes it.
    Key,
    /// A table of its own, shown as `[section.name]`.
    Table,
}

/// One declared setting, as the tables below give it.
#[derive(Debug)]
pub(crate) struct Key {
    /// Its section as errors name it: `[server]`, `[harvest]`, `[state]`, `[[repository]]`,
    /// `[repository.ocx]`.
    pub section: &'static str,
    /// Its TOML name.
    pub name: &'static str,
    /// Its doc lines.
    #[cfg(test)]
    pub doc: &'static str,
    /// What it takes, in words, for the error of a value of the wrong type.
    pub takes: &'static str,
    /// For a table of free keys (`headers`, `types`, `diwoo`): what each entry takes.
    pub entries: Option<&'static str>,
    /// A key or a table.
    #[cfg(test)]
    pub kind: Kind,
    /// A key of `[harvest]` that is the gateway's as a whole: not in `[repository.harvest]`.
    pub gateway_wide: bool,
    /// The environment variable over it, and the commands that read it.
    pub env: Option<(&'static str, &'static [CommandName])>,
    /// The flags over it, each with its command.
    pub flags: &'static [(CommandName, &'static str)],
}

/// The variables of the settings, as the process (or a test) gives them. `OAI_BRIDGE_CONFIG`
/// (which file) and `OAI_BRIDGE_LOG_FORMAT` (how to log) are clap's: both are read before any
/// layer.
#[derive(Clone, Default)]
pub(crate) struct Environment {
    vars: BTreeMap<&'static str, OsString>,
    /// The variables given by their `_FILE` twin, each with the twin's name (which errors
    /// name: the file is where the value is).
    from_files: BTreeMap<&'static str, &'static str>,
}

/// The names only: the values of some are secrets.
impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

impl Environment {
    /// The variables `names` as `lookup` gives them.
    pub(crate) fn of_variables(
        names: impl Iterator<Item = &'static str>,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Environment {
        let vars = names
            .filter_map(|name| Some((name, lookup(name)?)))
            .collect();
        Environment {
            vars,
            from_files: BTreeMap::new(),
        }
    }

    /// These variables with each secret's `_FILE` twin read: `(variable, twin)`, the twin
    /// naming the file that holds the variable's value (the container convention). `Err` names
    /// the twin and the file when it cannot be read, or when both the variable and its twin
    /// are set.
    pub(crate) fn with_files(
        mut self,
        twins: &[(&'static str, &'static str)],
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Environment, ConfigError> {
        for &(name, twin) in twins {
            let Some(file) = lookup(twin).filter(|f| !f.is_empty()) else {
                continue;
            };
            let origin = Origin::Env(twin);
            if self.vars.contains_key(name) {
                return Err(origin.error(format!("{name} is set too: set one of them")));
            }
            let value = super::read_secret(Path::new(&file)).map_err(|m| origin.error(m))?;
            self.vars.insert(name, value.into());
            self.from_files.insert(name, twin);
        }
        Ok(self)
    }

    /// The value of `name` as `read` takes it, given by that variable; `None` when unset or
    /// when `read` leaves it unset.
    pub(crate) fn given<T>(
        &self,
        name: &'static str,
        read: fn(&OsString) -> Option<T>,
    ) -> Option<Given<T>> {
        let value = read(self.vars.get(name)?)?;
        let name = self.from_files.get(name).copied().unwrap_or(name);
        Some(Given {
            value,
            origin: Origin::Env(name),
        })
    }
}

/// The override type of a key: its own unless it names another.
macro_rules! over_type {
    ($T:ty) => {
        $T
    };
    ($T:ty, $O:ty) => {
        $O
    };
}

/// A key's kind: a key unless it says `table`.
#[cfg(test)]
macro_rules! kind {
    () => {
        Kind::Key
    };
    (table) => {
        Kind::Table
    };
}

/// What the flags of `$command` give a key: its flag's value, when the command has the flag
/// and it was given.
macro_rules! from_flags {
    ($matches:ident, $command:ident, $V:ty) => {
        None
    };
    ($matches:ident, $command:ident, $V:ty, [$($c:ident $flag:literal),+]) => {{
        let mut given = None;
        $(
            if $command == CommandName::$c {
                given = <$V as FlagValue>::read($matches, &$flag[2..]).map(|value| Given {
                    value,
                    origin: Origin::Flag($flag),
                });
            }
        )+
        given
    }};
}

/// How a flag of a key's type is read: a value, a switch, or a repeatable value.
pub(crate) trait FlagValue: Sized {
    /// `arg` reading a value of this type.
    fn arg(arg: clap::Arg) -> clap::Arg;
    /// The value of the flag `id`, when given.
    fn read(matches: &clap::ArgMatches, id: &str) -> Option<Self>;
}

macro_rules! flag_value {
    ($($T:ty),*) => {$(
        impl FlagValue for $T {
            fn arg(arg: clap::Arg) -> clap::Arg {
                arg.action(clap::ArgAction::Set).value_parser(clap::value_parser!($T))
            }
            fn read(matches: &clap::ArgMatches, id: &str) -> Option<Self> {
                matches.get_one::<$T>(id).cloned()
            }
        }
    )*};
}

flag_value!(String, PathBuf, u64, u32, usize, f64);

/// A switch: given, it switches the setting on; without it, the layers below decide.
impl FlagValue for bool {
    fn arg(arg: clap::Arg) -> clap::Arg {
        arg.action(clap::ArgAction::SetTrue)
    }
    fn read(matches: &clap::ArgMatches, id: &str) -> Option<Self> {
        matches.get_flag(id).then_some(true)
    }
}

/// A repeatable flag: given when it was given at least once.
impl FlagValue for Vec<String> {
    fn arg(arg: clap::Arg) -> clap::Arg {
        arg.action(clap::ArgAction::Append)
            .value_parser(clap::value_parser!(String))
    }
    fn read(matches: &clap::ArgMatches, id: &str) -> Option<Self> {
        Some(matches.get_many::<String>(id)?.cloned().collect())
    }
}

/// Applies an override's value, when given, with the key's `apply_over` or else its `apply`.
macro_rules! over_apply {
    ($given:expr, $target:ident, $at:ident, $Target:ty, $O:ty, (), ()) => {};
    ($given:expr, $target:ident, $at:ident, $Target:ty, $O:ty, ($apply:expr), ()) => {
        over_apply!($given, $target, $at, $Target, $O, (), ($apply))
    };
    ($given:expr, $target:ident, $at:ident, $Target:ty, $O:ty, ($($apply:expr)?), ($over:expr)) => {
        if let Some(given) = &$given {
            let apply: fn(&mut $Target, $O, &At<'_>) -> Result<(), String> = $over;
            apply($target, given.value.clone(), $at).map_err(|m| given.origin.error(m))?;
        }
    };
}

/// Where values are read from: the folder relative paths are taken from (the file's; an
/// override's are the working directory's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct At<'a> {
    /// The folder relative paths are taken from.
    pub base_dir: &'a Path,
}

impl At<'static> {
    /// An override's: relative paths stay relative, to the working directory.
    pub(crate) fn overrides() -> At<'static> {
        At {
            base_dir: Path::new(""),
        }
    }
}

/// The validated section a section's keys make, when they declare its fields (`field: name:
/// Type = default`): the struct, and its defaults.
macro_rules! target_struct {
    (() $($rest:tt)*) => {};
    (
        ($(#[$sattr:meta])* $Gen:ident $at:ident) $section:literal, $doc:expr;
        $([$d:expr; $key:ident; $($fname:ident: $FT:ty = $default:expr; $reload:ident)?])*
    ) => {
        #[doc = $doc]
        $(#[$sattr])*
        pub struct $Gen {
            $($(
                #[doc = $d]
                pub $fname: $FT,
            )?)*
        }

        impl $Gen {
            /// The section's defaults, relative paths taken from `at`.
            #[allow(unused_variables)]
            pub(crate) fn defaults($at: &At<'_>) -> $Gen {
                $Gen {
                    $($($fname: $default,)?)*
                }
            }

            /// The keys whose values differ between `self`, running, and `next`, and that only a
            /// restart applies (each field says `restart` or `reloaded` in its declaration).
            #[allow(dead_code)]
            pub(crate) fn needs_restart(&self, next: &$Gen) -> Vec<&'static str> {
                let mut keys = Vec::new();
                $($(
                    if restarts!($reload) && self.$fname != next.$fname {
                        keys.push(concat!($section, " ", stringify!($key)));
                    }
                )?)*
                keys
            }
        }
    };
}

/// Whether a change of a field takes a restart: `restart`, or `reloaded` (a reload applies it).
macro_rules! restarts {
    (restart) => {
        true
    };
    (reloaded) => {
        false
    };
}

/// `Some` of what is given, else `None`.
macro_rules! optional {
    () => {
        None
    };
    ($value:expr) => {
        Some($value)
    };
}

/// What the environment gives a key for `$command`: its variable's value when the key has one
/// and the command reads it.
macro_rules! from_env {
    ($env:ident, $command:ident) => {
        None
    };
    ($env:ident, $command:ident, $ENV:ident, $read:ident, [$($c:ident),+]) => {
        if [$(CommandName::$c),+].contains(&$command) {
            $env.given(Environment::$ENV, $read)
        } else {
            None
        }
    };
}

/// One section of `bridge.toml`, a key at a time: generates its raw serde struct (`$Raw`, every
/// field optional, unknown keys refused), its overrides (`$Over`: what the environment and the
/// flags give, each value with its [`Origin`]), their merge, what the environment gives each
/// command, and the declarations (`$KEYS`).
///
/// Each key: its doc lines, `name: Type { takes: "...", }`, then optionally `entries:` (a
/// table of free keys: what each entry takes), `over:` (the override's type when it is not
/// the key's), `env: CONST = "VARIABLE" via reader for [Command, ...]` (or `env: CONST via
/// ...` for a variable another key declared), `flags: [Command "--flag", ...]`, `kind: table`.
macro_rules! section {
    (
        $(#[doc = $sdoc:literal])*
        $section:literal => $Raw:ident, $Over:ident, $KEYS:ident, $Target:ty
            $(= $(#[$sattr:meta])* struct $Gen:ident($at:ident))? {
            $(
                $(#[doc = $doc:literal])*
                $key:ident: $T:ty {
                    takes: $takes:literal,
                    $(entries: $entries:literal,)?
                    $(over: $O:ty,)?
                    $(env: $ENV:ident $(= $var:literal)? via $read:ident for [$($ecmd:ident),+],)?
                    $(flags: [$(
                        $fcmd:ident $flag:literal $vn:literal $($method:ident($marg:literal))*:
                            $help:expr
                    ),+],)?
                    $(kind: $kind:ident,)?
                    $(gateway_wide: $gateway_wide:literal,)?
                    $(field: $fname:ident: $FT:ty = $default:expr; $reload:ident,)?
                    $(apply: $apply:expr,)?
                    $(apply_over: $apply_over:expr,)?
                }
            )*
        }
    ) => {
        target_struct!(
            ($($(#[$sattr])* $Gen $at)?) $section, concat!($($sdoc, "\n"),*);
            $([concat!($($doc, "\n"),*); $key; $($fname: $FT = $default; $reload)?])*
        );

        $(#[doc = $sdoc])*
        ///
        /// As the file gives it: every key optional, unknown keys refused.
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct $Raw {
            $(
                $(#[doc = $doc])*
                pub(crate) $key: Option<$T>,
            )*
        }

        $(#[doc = $sdoc])*
        ///
        /// What one layer over the file gives (`None` leaves a setting to the layer below).
        #[allow(dead_code)]
        #[derive(Clone, Debug, Default)]
        pub(crate) struct $Over {
            $(
                $(#[doc = $doc])*
                pub $key: Option<Given<over_type!($T $(, $O)?)>>,
            )*
        }

        #[allow(dead_code)]
        impl $Over {
            /// These overrides with `over` on top: each setting `over` gives replaces this one's.
            pub(crate) fn merge(self, over: $Over) -> $Over {
                $Over { $($key: over.$key.or(self.$key)),* }
            }

            /// What the environment gives `command`.
            #[allow(unused_variables)]
            pub(crate) fn from_env(env: &Environment, command: CommandName) -> $Over {
                $Over {
                    $($key: from_env!(env, command $(, $ENV, $read, [$($ecmd),+])?),)*
                }
            }

            /// Applies what these overrides give over `target`, key by key in the declared
            /// order, each with its `apply` (or `apply_over`); `Err` names the variable or flag.
            #[allow(unused_variables)]
            pub(crate) fn apply(
                &self,
                target: &mut $Target,
                at: &At<'_>,
            ) -> Result<(), ConfigError> {
                $(
                    over_apply!(
                        self.$key, target, at, $Target, over_type!($T $(, $O)?),
                        ($($apply)?), ($($apply_over)?)
                    );
                )*
                Ok(())
            }

            /// `cmd` with the flags `command` has over this section's keys.
            #[allow(unused_mut, unused_variables)]
            pub(crate) fn flag_args(mut cmd: clap::Command, command: CommandName) -> clap::Command {
                $({
                    #[allow(dead_code)]
                    type V = over_type!($T $(, $O)?);
                    $($(
                        if command == CommandName::$fcmd {
                            let arg = clap::Arg::new(&$flag[2..])
                                .long(&$flag[2..])
                                // As clap's derive says a doc line: without its final period.
                                .help($help.strip_suffix('.').unwrap_or($help))
                                $(.$method($marg))*;
                            let arg = if $vn.is_empty() { arg } else { arg.value_name($vn) };
                            cmd = cmd.arg(<V as FlagValue>::arg(arg));
                        }
                    )+)?
                })*
                cmd
            }

            /// What the flags of `command` give, as clap read them.
            #[allow(unused_variables)]
            pub(crate) fn from_flags(matches: &clap::ArgMatches, command: CommandName) -> $Over {
                $Over {
                    $($key: {
                        #[allow(dead_code)]
                        type V = over_type!($T $(, $O)?);
                        from_flags!(matches, command, V $(, [$($fcmd $flag),+])?)
                    },)*
                }
            }

            /// The keys given, each with where.
            pub(crate) fn origins(&self) -> Vec<(&'static str, Origin)> {
                let mut given = Vec::new();
                $(
                    if let Some(v) = &self.$key {
                        given.push((stringify!($key), v.origin));
                    }
                )*
                given
            }
        }

        impl $Raw {
            /// Applies the keys the file gives over `target` (its defaults, or the section
            /// below it), key by key in the declared order; `Err` names the key. A table
            /// (`kind: table`) is the caller's to read: take it out first.
            #[allow(unused_variables)]
            pub(crate) fn apply(
                self,
                target: &mut $Target,
                at: &At<'_>,
            ) -> Result<(), (&'static str, String)> {
                $($(
                    if let Some(value) = self.$key {
                        let apply: fn(&mut $Target, $T, &At<'_>) -> Result<(), String> = $apply;
                        apply(target, value, at).map_err(|m| (stringify!($key), m))?;
                    }
                )?)*
                Ok(())
            }

            /// The keys the file gives.
            #[allow(dead_code)]
            pub(crate) fn given(&self) -> Vec<&'static str> {
                let mut given = Vec::new();
                $(
                    if self.$key.is_some() {
                        given.push(stringify!($key));
                    }
                )*
                given
            }
        }

        impl Environment {
            $($($(
                #[doc = concat!("`", $section, " ", stringify!($key), "`.")]
                pub(crate) const $ENV: &'static str = $var;
            )?)?)*
        }

        $(#[doc = $sdoc])*
        pub(crate) const $KEYS: &[Key] = &[
            $(
                Key {
                    section: $section,
                    name: stringify!($key),
                    #[cfg(test)]
                    doc: concat!($($doc, "\n"),*),
                    takes: $takes,
                    entries: optional!($($entries)?),
                    #[cfg(test)]
                    kind: kind!($($kind)?),
                    gateway_wide: false $(|| $gateway_wide)?,
                    env: optional!($((Environment::$ENV, &[$(CommandName::$ecmd),+]))?),
                    flags: &[$($((CommandName::$fcmd, $flag)),+)?],
                },
            )*
        ];
    };
}
