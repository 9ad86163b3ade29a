//! A small `--key value` argument parser with clear errors.

use std::collections::BTreeMap;
use std::str::FromStr;

pub struct Args {
    values: BTreeMap<String, String>,
    flags: Vec<String>,
}

impl Args {
    /// Parses `--key value` options (names in `options`) and bare `--flag`s.
    pub fn parse(argv: &[String], options: &[&str], flags: &[&str]) -> Result<Args, String> {
        let mut values = BTreeMap::new();
        let mut seen_flags = Vec::new();
        let mut i = 0;
        while i < argv.len() {
            let arg = &argv[i];
            let Some(name) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument '{arg}'"));
            };
            let (name, inline) = match name.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (name, None),
            };
            if flags.contains(&name) {
                seen_flags.push(name.to_string());
            } else if options.contains(&name) {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        argv.get(i)
                            .cloned()
                            .ok_or_else(|| format!("option --{name} needs a value"))?
                    }
                };
                values.insert(name.to_string(), value);
            } else {
                let mut known: Vec<String> = options.iter().map(|o| format!("--{o}")).collect();
                known.extend(flags.iter().map(|f| format!("--{f}")));
                return Err(format!(
                    "unknown option '--{name}' (known: {})",
                    known.join(", ")
                ));
            }
            i += 1;
        }
        Ok(Args {
            values,
            flags: seen_flags,
        })
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The option parsed as `T`, or `default` when absent.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                format!(
                    "option --{name}: cannot read '{v}' as a {}",
                    short_type::<T>()
                )
            }),
        }
    }

    pub fn required(&self, name: &str) -> Result<&str, String> {
        self.str(name)
            .ok_or_else(|| format!("missing required option --{name}"))
    }
}

fn short_type<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    match full {
        "usize" | "u64" | "u32" => "non-negative integer",
        "f64" | "f32" => "number",
        _ => full,
    }
}
