//! A segment tree over time points with range add and range max (lazy propagation), for the
//! memory usage profile: adding a node's usage over its liveness range and asking for the peak
//! over a range are both O(log T).

pub(crate) struct MaxAddTree {
    n: usize,
    max: Vec<i128>,
    add: Vec<i128>,
}

impl MaxAddTree {
    pub(crate) fn new(n: usize) -> Self {
        let size = 4 * n.max(1);
        MaxAddTree { n: n.max(1), max: vec![0; size], add: vec![0; size] }
    }

    /// Adds `d` to every point in `[lo, hi)`.
    pub(crate) fn add(&mut self, lo: usize, hi: usize, d: i128) {
        if lo < hi && d != 0 {
            self.add_rec(1, 0, self.n, lo, hi, d);
        }
    }

    /// The maximum over `[lo, hi)`; `i128::MIN` for an empty range.
    pub(crate) fn max(&self, lo: usize, hi: usize) -> i128 {
        if lo >= hi {
            return i128::MIN;
        }
        self.max_rec(1, 0, self.n, lo, hi)
    }

    /// The maximum over all points and the leftmost point where it occurs.
    pub(crate) fn argmax(&self) -> (i128, usize) {
        let (mut node, mut l, mut r) = (1usize, 0usize, self.n);
        while r - l > 1 {
            let m = (l + r) / 2;
            if self.max[2 * node] >= self.max[2 * node + 1] {
                node *= 2;
                r = m;
            } else {
                node = 2 * node + 1;
                l = m;
            }
        }
        (self.max[1], l)
    }

    fn add_rec(&mut self, node: usize, l: usize, r: usize, lo: usize, hi: usize, d: i128) {
        if hi <= l || r <= lo {
            return;
        }
        if lo <= l && r <= hi {
            self.max[node] += d;
            self.add[node] += d;
            return;
        }
        let m = (l + r) / 2;
        self.add_rec(2 * node, l, m, lo, hi, d);
        self.add_rec(2 * node + 1, m, r, lo, hi, d);
        self.max[node] = self.add[node] + self.max[2 * node].max(self.max[2 * node + 1]);
    }

    fn max_rec(&self, node: usize, l: usize, r: usize, lo: usize, hi: usize) -> i128 {
        if hi <= l || r <= lo {
            return i128::MIN;
        }
        if lo <= l && r <= hi {
            return self.max[node];
        }
        let m = (l + r) / 2;
        let best = self.max_rec(2 * node, l, m, lo, hi).max(self.max_rec(2 * node + 1, m, r, lo, hi));
        best + self.add[node]
    }
}

#[cfg(test)]
mod tests {
    use super::MaxAddTree;

    #[test]
    fn argmax_is_the_leftmost_peak() {
        let mut t = MaxAddTree::new(10);
        t.add(2, 7, 5);
        t.add(4, 9, 3);
        t.add(0, 10, -1);
        assert_eq!(t.argmax(), (7, 4));
        t.add(4, 7, -3);
        assert_eq!(t.argmax(), (4, 2));
        assert_eq!(t.max(7, 10), 2);
    }
}
