//! Rows measured in rounds, the clients taking turns: each round starts with the next client,
//! and each cell (a client, or a case and a client) adds its rounds up.

use crate::peer::Measured;

/// The clients' order in a round: each round starts with the next client.
pub fn turn<T: Copy>(clients: &[T], round: usize) -> Vec<T> {
    (0..clients.len()).map(|i| clients[(i + round) % clients.len()]).collect()
}

/// What each cell measured so far, its rounds added up; a cell's first error sticks.
pub struct Totals<K> {
    cells: Vec<(K, Option<Result<Measured, String>>)>,
}

impl<K: Copy + PartialEq> Totals<K> {
    /// Nothing measured yet in any of `cells`, kept in this order.
    pub fn new(cells: impl IntoIterator<Item = K>) -> Self {
        Self { cells: cells.into_iter().map(|cell| (cell, None)).collect() }
    }

    /// Whether a round of `cell` failed: its later rounds are skipped.
    pub fn failed(&self, cell: K) -> bool {
        self.cells.iter().any(|(k, total)| *k == cell && matches!(total, Some(Err(_))))
    }

    /// Adds one round of `cell`.
    pub fn add(&mut self, cell: K, round: Result<Measured, String>) {
        let Some((_, total)) = self.cells.iter_mut().find(|(k, _)| *k == cell) else { return };
        match (total.as_mut(), round) {
            (None, round) => *total = Some(round),
            (Some(Ok(sum)), Ok(more)) => sum.merge(more),
            (Some(Ok(_)), Err(e)) => *total = Some(Err(e)),
            (Some(Err(_)), _) => {}
        }
    }

    /// Each cell that measured anything, in the order given, with its total.
    pub fn measured(self) -> impl Iterator<Item = (K, Result<Measured, String>)> {
        self.cells.into_iter().filter_map(|(cell, total)| Some((cell, total?)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{turn, Totals};
    use crate::peer::Measured;
    use crate::stats::Requests;

    fn round(ops: u64) -> Result<Measured, String> {
        Ok(Measured { result: json!({ "ops": ops }), requests: Requests::default(), queued: true })
    }

    #[test]
    fn each_round_starts_with_the_next_client() {
        assert_eq!(turn(&['a', 'b', 'c'], 0), ['a', 'b', 'c']);
        assert_eq!(turn(&['a', 'b', 'c'], 1), ['b', 'c', 'a']);
        assert_eq!(turn(&['a', 'b', 'c'], 3), ['a', 'b', 'c']);
    }

    #[test]
    fn rounds_add_up_and_the_first_error_sticks() {
        let mut totals = Totals::new(['a', 'b', 'c']);
        totals.add('a', round(2));
        totals.add('a', round(3));
        totals.add('b', round(1));
        totals.add('b', Err("first".into()));
        assert!(totals.failed('b') && !totals.failed('a') && !totals.failed('c'));
        totals.add('b', Err("second".into()));
        totals.add('b', round(5));
        totals.add('z', round(7));
        let measured: Vec<_> = totals.measured().collect();
        assert_eq!(measured.len(), 2, "`c` measured nothing, `z` is no cell");
        assert!(matches!(&measured[0], ('a', Ok(m)) if m.result["ops"].as_f64() == Some(5.0)));
        assert!(matches!(&measured[1], ('b', Err(e)) if e == "first"));
    }
}
