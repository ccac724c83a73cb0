//! What both binaries do before they touch a GPU: ranks from the environment (as torchrun
//! sets them) and the choice of device. Kept here so the two binaries agree and it is tested.

use crate::error::{bail_config, Error, Result};

/// A non-negative integer environment variable; `None` when unset.
pub fn env_usize(name: &str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(v) => parse_usize(name, &v).map(Some),
        Err(_) => Ok(None),
    }
}

fn parse_usize(name: &str, v: &str) -> Result<usize> {
    v.trim()
        .parse()
        .map_err(|_| Error::config(format!("{name}={v:?} is not a non-negative integer")))
}

/// `RANK` and `WORLD_SIZE` (default 0 and 1).
pub fn rank_and_world() -> Result<(usize, usize)> {
    Ok((
        env_usize("RANK")?.unwrap_or(0),
        env_usize("WORLD_SIZE")?.unwrap_or(1),
    ))
}

/// The GPU of this rank: `--device`, else `LOCAL_RANK`, else `RANK` modulo the visible count.
pub fn pick_device(
    flag: Option<usize>,
    local_rank: Option<usize>,
    rank: usize,
    count: usize,
) -> Result<usize> {
    if count == 0 {
        bail_config!("no GPU visible");
    }
    let device = flag.or(local_rank).unwrap_or(rank % count);
    if device >= count {
        bail_config!("GPU {device} requested but only {count} visible");
    }
    Ok(device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_choice() {
        assert_eq!(pick_device(Some(1), Some(0), 0, 2).unwrap(), 1);
        assert_eq!(pick_device(None, Some(1), 0, 2).unwrap(), 1);
        assert_eq!(pick_device(None, None, 5, 2).unwrap(), 1);
        let e = pick_device(Some(2), None, 0, 2).unwrap_err();
        assert_eq!(e.to_string(), "GPU 2 requested but only 2 visible");
    }

    #[test]
    fn env_values() {
        assert_eq!(parse_usize("RANK", " 3 ").unwrap(), 3);
        let e = parse_usize("RANK", "-1").unwrap_err();
        assert_eq!(e.to_string(), "RANK=\"-1\" is not a non-negative integer");
    }
}
