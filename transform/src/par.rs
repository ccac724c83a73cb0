//! Parallel work that calls polars: plain scoped threads, one contiguous share of the items
//! each.
//!
//! rayon's work stealing is the wrong tool here. polars runs its own thread pool, and a rayon
//! worker blocked on it steals more tasks onto the same stack: reading a 1,000-rank dataset
//! that way nested hundreds of partition reads, overflowed a worker's stack and held 3 GB.
//! A fixed share per thread keeps one read in flight per core.

/// `f` of every item, in order, on up to one thread per core; the first error wins.
pub(crate) fn map<T, R, E>(items: &[T], f: impl Fn(&T) -> Result<R, E> + Sync) -> Result<Vec<R>, E>
where
    T: Sync,
    R: Send,
    E: Send,
{
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = items.len().div_ceil(cores.max(1)).max(1);
    std::thread::scope(|s| {
        let f = &f;
        let workers: Vec<_> = items
            .chunks(per)
            .map(|share| {
                std::thread::Builder::new()
                    .stack_size(16 << 20)
                    .spawn_scoped(s, move || {
                        share.iter().map(f).collect::<Result<Vec<R>, E>>()
                    })
                    .expect("a thread can be started")
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for w in workers {
            out.extend(w.join().expect("a worker panicked")?);
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn in_order_and_the_error_is_kept() {
        let v: Vec<i32> = (0..100).collect();
        let doubled = super::map(&v, |x| Ok::<_, ()>(x * 2)).unwrap();
        assert_eq!(doubled, (0..100).map(|x| x * 2).collect::<Vec<_>>());
        let err = super::map(&v, |&x| if x == 57 { Err(x) } else { Ok(x) });
        assert_eq!(err, Err(57));
        assert!(super::map(&[] as &[i32], |x| Ok::<_, ()>(*x))
            .unwrap()
            .is_empty());
    }
}
