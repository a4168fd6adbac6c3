//! Independent jobs on scoped worker threads: the jobs are handed out one at a time by an
//! atomic counter to whichever worker asks, so uneven jobs balance. No thread outlives the
//! call (`std::thread::scope`), so there is no pool to corrupt across `fork`; a thread the
//! system refuses to spawn leaves its share to the others (the calling thread always works).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f(0), f(1), …, f(n - 1)` on at most `threads` threads (the calling thread one of them),
/// in index order.
pub fn map<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let workers = threads.clamp(1, n.max(1));
    if workers == 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<T>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        let out = f(i);
        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
    };
    std::thread::scope(|s| {
        for _ in 1..workers {
            let _ = std::thread::Builder::new().spawn_scoped(s, work);
        }
        work();
    });
    slots.into_iter().map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()).expect("every job is run")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_in_index_order_on_any_number_of_threads() {
        for threads in [0, 1, 2, 7, 100] {
            assert_eq!(super::map(50, threads, |i| i * i), (0..50).map(|i| i * i).collect::<Vec<_>>());
        }
        assert!(super::map(0, 4, |i| i).is_empty());
    }
}
