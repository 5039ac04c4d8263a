//! Shards: which slice of a sweep's runs this process runs, from `K/N`,
//! `N` or `auto` and the job array's environment (Slurm, Kubernetes Indexed
//! Jobs).

use crate::settings::{Explain, Names, Setting};

/// This process's slice of the runs: shard `k` (1-based) of `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub k: usize,
    pub n: usize,
}

impl Shard {
    /// Whether the `i`-th run (0-based, in [`Sweep::runs`] order) is this shard's.
    pub fn owns(&self, i: usize) -> bool {
        i % self.n == self.k - 1
    }

    /// This shard's runs, in the order given.
    pub fn select<T: Clone>(&self, runs: &[T]) -> Vec<T> {
        runs.iter().enumerate().filter(|(i, _)| self.owns(*i)).map(|(_, r)| r.clone()).collect()
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// `--shard` as typed: `K/N`, `N` (K from the environment), or `auto` (K
/// and N from a Slurm job array).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardArg {
    Given { k: usize, n: usize },
    Count(usize),
    Auto,
}

impl std::str::FromStr for ShardArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let num = |x: &str| -> Result<usize, String> {
            x.trim().parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| format!("`{x}` is not a positive whole number"))
        };
        if s == "auto" {
            return Ok(ShardArg::Auto);
        }
        match s.split_once('/') {
            Some((k, n)) => {
                let (k, n) = (num(k)?, num(n)?);
                if k > n {
                    return Err(format!("shard {k}/{n}: K must be between 1 and N"));
                }
                Ok(ShardArg::Given { k, n })
            }
            None => num(s).map(ShardArg::Count).map_err(|e| format!("expected K/N, N or auto: {e}")),
        }
    }
}

/// The job array's environment does not name one shard. The messages name
/// the scheduler's variables, not the flag: the face adds that.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    #[error("{name}={value} is not a whole number")]
    NotANumber { name: &'static str, value: String },
    #[error("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not")]
    CountMissing,
    #[error("SLURM_ARRAY_TASK_COUNT is {0}; a job array has at least one task")]
    EmptyArray(i64),
    #[error("the Slurm array task {id} (min {min}, count {count}) is not one of tasks {min}..{}; use a contiguous array (array=0-{})", min + count - 1, count - 1)]
    NotInArray { id: i64, min: i64, count: i64 },
    #[error("finding the shard needs a Slurm job array (SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT)")]
    NoSlurmArray,
    #[error("both JOB_COMPLETION_INDEX and SLURM_ARRAY_TASK_ID are set")]
    BothSchedulers { n: usize },
    #[error("JOB_COMPLETION_INDEX={index} is not between 0 and {}", n - 1)]
    IndexOutOfRange { n: usize, index: i64 },
    #[error("the Slurm array has {count} tasks (SLURM_ARRAY_TASK_COUNT), not {n}")]
    ArraySize { n: usize, count: usize },
    #[error(
        "this shard's number comes from JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID (Slurm job array), and neither is set"
    )]
    NoScheduler { n: usize },
}

fn env_number(env: &dyn Fn(&str) -> Option<String>, name: &'static str) -> Result<Option<i64>, ShardError> {
    match env(name) {
        None => Ok(None),
        Some(v) => v.trim().parse::<i64>().map(Some).map_err(|_| ShardError::NotANumber { name, value: v }),
    }
}

/// K and N of a Slurm job array, when this is one.
fn slurm(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<(usize, usize)>, ShardError> {
    let Some(id) = env_number(env, "SLURM_ARRAY_TASK_ID")? else {
        return Ok(None);
    };
    let min = env_number(env, "SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
    let count = env_number(env, "SLURM_ARRAY_TASK_COUNT")?.ok_or(ShardError::CountMissing)?;
    if count < 1 {
        return Err(ShardError::EmptyArray(count));
    }
    // Checked: values at the ends of i64 would wrap round to a valid shard.
    let k = id.checked_sub(min).and_then(|d| d.checked_add(1)).filter(|k| (1..=count).contains(k));
    let Some(k) = k else {
        return Err(ShardError::NotInArray { id, min, count });
    };
    Ok(Some((k as usize, count as usize)))
}

impl ShardArg {
    /// The shard this process runs. `N` takes K from `JOB_COMPLETION_INDEX`
    /// (a Kubernetes Indexed Job: K = index + 1) or a Slurm array
    /// (`SLURM_ARRAY_TASK_ID` − `SLURM_ARRAY_TASK_MIN` + 1, whose
    /// `SLURM_ARRAY_TASK_COUNT` must then be N); `auto` takes K and N from Slurm.
    pub fn resolve(self, env: &dyn Fn(&str) -> Option<String>) -> Result<Shard, ShardError> {
        match self {
            ShardArg::Given { k, n } => Ok(Shard { k, n }),
            ShardArg::Auto => slurm(env)?.map(|(k, n)| Shard { k, n }).ok_or(ShardError::NoSlurmArray),
            ShardArg::Count(n) => match (env_number(env, "JOB_COMPLETION_INDEX")?, slurm(env)?) {
                (Some(_), Some(_)) => Err(ShardError::BothSchedulers { n }),
                (Some(index), None) if index < 0 || index as usize >= n => Err(ShardError::IndexOutOfRange { n, index }),
                (Some(index), None) => Ok(Shard { k: index as usize + 1, n }),
                (None, Some((_, count))) if count != n => Err(ShardError::ArraySize { n, count }),
                (None, Some((k, _))) => Ok(Shard { k, n }),
                (None, None) => Err(ShardError::NoScheduler { n }),
            },
        }
    }
}

impl Explain for ShardError {
    fn explain(&self, n: &dyn Names) -> String {
        use ShardError as S;
        match self {
            S::NoSlurmArray => format!(
                "{}: {self}; for a Kubernetes Indexed Job give the number of shards: {}",
                n.set(Setting::Shard, "auto"),
                n.set(Setting::Shard, "N")
            ),
            S::NoScheduler { n: count } | S::BothSchedulers { n: count } => {
                format!("{}: {self}; give {}", n.set(Setting::Shard, &count.to_string()), n.set(Setting::Shard, &format!("K/{count}")))
            }
            S::IndexOutOfRange { n: count, .. } | S::ArraySize { n: count, .. } => {
                format!("{}: {self}", n.set(Setting::Shard, &count.to_string()))
            }
            _ => format!("{}: {self}", n.name(Setting::Shard)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k: &str| map.get(k).cloned()
    }

    /// The error `r` holds (it must hold one), as one line.
    fn error<T: std::fmt::Debug>(r: Result<T, impl std::fmt::Display>) -> String {
        match r {
            Ok(v) => panic!("expected an error, got {v:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn shard_syntax_and_environment() {
        assert_eq!("2/3".parse::<ShardArg>().unwrap(), ShardArg::Given { k: 2, n: 3 });
        assert_eq!("4".parse::<ShardArg>().unwrap(), ShardArg::Count(4));
        assert_eq!("auto".parse::<ShardArg>().unwrap(), ShardArg::Auto);
        for (bad, why) in [
            ("0/2", "`0` is not a positive whole number"),
            ("3/2", "shard 3/2: K must be between 1 and N"),
            ("x", "expected K/N, N or auto: `x` is not a positive whole number"),
            ("1/0", "`0` is not a positive whole number"),
            ("0", "expected K/N, N or auto"),
            ("", "expected K/N, N or auto"),
        ] {
            let e = error(bad.parse::<ShardArg>());
            assert!(e.contains(why), "{bad}: {e}");
        }
        let none = env_of(&[]);
        assert_eq!(ShardArg::Given { k: 1, n: 2 }.resolve(&none).unwrap(), Shard { k: 1, n: 2 });
        let e = error(ShardArg::Count(2).resolve(&none));
        assert!(e.contains("and neither is set"), "{e}");
        let e = error(ShardArg::Auto.resolve(&none));
        assert!(e.contains("needs a Slurm job array"), "{e}");

        let k8s = env_of(&[("JOB_COMPLETION_INDEX", "1")]);
        assert_eq!(ShardArg::Count(3).resolve(&k8s).unwrap(), Shard { k: 2, n: 3 });
        let e = error(ShardArg::Count(1).resolve(&k8s));
        assert!(e.contains("JOB_COMPLETION_INDEX=1 is not between 0 and 0"), "{e}");

        // At the ends of i64 the arithmetic does not wrap round to a shard.
        let wrap = env_of(&[
            ("SLURM_ARRAY_TASK_ID", "-9223372036854775808"),
            ("SLURM_ARRAY_TASK_MIN", "9223372036854775807"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        let e = error(ShardArg::Auto.resolve(&wrap));
        assert!(e.contains("9223372036854775807"), "{e}");
        let slurm = env_of(&[("SLURM_ARRAY_TASK_ID", "11"), ("SLURM_ARRAY_TASK_MIN", "10"), ("SLURM_ARRAY_TASK_COUNT", "4")]);
        assert_eq!(ShardArg::Auto.resolve(&slurm).unwrap(), Shard { k: 2, n: 4 });
        assert_eq!(ShardArg::Count(4).resolve(&slurm).unwrap(), Shard { k: 2, n: 4 });
        let e = error(ShardArg::Count(3).resolve(&slurm));
        assert!(e.contains("the Slurm array has 4 tasks (SLURM_ARRAY_TASK_COUNT), not 3"), "{e}");
        // An explicit K/N wins over the environment.
        assert_eq!(ShardArg::Given { k: 1, n: 4 }.resolve(&slurm).unwrap(), Shard { k: 1, n: 4 });
    }
}
