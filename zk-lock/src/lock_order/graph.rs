//! The lock-order graph as the user sees it: the edges between lock classes, each with who made
//! it first, and the cycles among them.

use std::fmt;
use std::panic::Location;

use crate::declared::Declaration;

/// The most cycles [`LockOrder::cycles`] lists: the search stops there.
const MAX_CYCLES: usize = 100;

/// An edge of the lock-order graph: a task started to acquire a lock of class `taken` while it
/// held one of class `held`.
///
/// A class is the path template of an annotated function, its placeholders without their names
/// (`/product_<_>`), or the path of a lock taken through the API (`Mutex::new("/locks/orders")`);
/// see [`lock_order()`](super::lock_order()).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockOrderEdge {
    /// The class held.
    pub held: String,
    /// The class taken while it was held.
    pub taken: String,
    /// How many acquisitions made this edge.
    pub count: u64,
    /// The annotated function that had taken the held lock, the first time the edge was made;
    /// `None` for a lock taken through the API.
    pub held_by: Option<Declaration>,
    /// The annotated function that took the lock of class `taken`, the first time; `None` for a
    /// lock taken through the API.
    pub taken_by: Option<Declaration>,
    /// For a held lock taken through the API, where its recipe was made (`Mutex::new` and the
    /// like; a multi-lock's members, where the multi-lock was).
    pub held_at: Option<&'static Location<'static>>,
    /// For a lock of class `taken` taken through the API, where its recipe was made.
    pub taken_at: Option<&'static Location<'static>>,
}

impl fmt::Display for LockOrderEdge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` -> `{}`: {}", self.held, self.taken, Made(self))?;
        if self.count > 1 {
            write!(f, " ({} times)", self.count)?;
        }
        Ok(())
    }
}

/// Who made an edge first: "`g` at file:line took `b` while `f` at file:line held `a`".
struct Made<'a>(&'a LockOrderEdge);

impl fmt::Display for Made<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let edge = self.0;
        write!(
            f,
            "{} took `{}` while {} held `{}`",
            By(edge.taken_by.as_ref(), edge.taken_at),
            edge.taken,
            By(edge.held_by.as_ref(), edge.held_at),
            edge.held
        )
    }
}

/// An annotated function and its place, or a call through the API and where its recipe was made.
struct By<'a>(Option<&'a Declaration>, Option<&'static Location<'static>>);

impl fmt::Display for By<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            By(Some(site), _) => write!(f, "`{}` at {}:{}", site.function, site.file, site.line),
            By(None, Some(made_at)) => write!(f, "a lock made at {}:{}", made_at.file(), made_at.line()),
            By(None, None) => f.write_str("a call through the API"),
        }
    }
}

/// The lock-order graph recorded in this process: which lock classes tasks took while holding
/// which (see [`lock_order()`](super::lock_order())).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockOrder {
    /// Sorted by held class, then taken class.
    edges: Vec<LockOrderEdge>,
}

impl LockOrder {
    pub(crate) fn new(mut edges: Vec<LockOrderEdge>) -> Self {
        edges.sort_by(|a, b| (&a.held, &a.taken).cmp(&(&b.held, &b.taken)));
        Self { edges }
    }

    /// The edges, sorted by held class, then taken class.
    pub fn edges(&self) -> &[LockOrderEdge] {
        &self.edges
    }

    /// Every cycle of the graph (at most 100), each once, starting from its smallest class: a
    /// set of acquisitions that tasks running at once could each be waiting in, for a lock
    /// another one holds. A class taken while holding a lock of the same class is a cycle of
    /// one edge.
    pub fn cycles(&self) -> Vec<LockOrderCycle> {
        CycleSearch::new(&self.edges).run()
    }
}

impl fmt::Display for LockOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.edges.is_empty() {
            return f.write_str("no lock was taken while another was held");
        }
        for (i, edge) in self.edges.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{edge}")?;
        }
        Ok(())
    }
}

/// A cycle of the lock-order graph: each edge's `taken` class is the next edge's `held`, and the
/// last edge's `taken` is the first one's `held`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOrderCycle {
    edges: Vec<LockOrderEdge>,
}

impl LockOrderCycle {
    /// The edges, in the cycle's order, from its smallest class.
    pub fn edges(&self) -> &[LockOrderEdge] {
        &self.edges
    }

    /// The classes, in the cycle's order, from the smallest.
    pub fn classes(&self) -> impl Iterator<Item = &str> {
        self.edges.iter().map(|edge| edge.held.as_str())
    }
}

impl fmt::Display for LockOrderCycle {
    /// The classes around the cycle on one line, then each edge on a line of its own, then what
    /// to do.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for class in self.classes() {
            write!(f, "`{class}` -> ")?;
        }
        write!(f, "`{}`", self.edges[0].held)?;
        for edge in &self.edges {
            write!(f, "\n    {}", Made(edge))?;
        }
        f.write_str(if self.edges.len() == 1 {
            "\n    two calls with the values swapped can deadlock: take such locks together \
             (`#[zk_multi_lock]` or `MultiLock`, which sort them)"
        } else {
            "\n    tasks taking them in these orders at once can deadlock, in one process or across processes: \
             take them in one order everywhere, or together (`#[zk_multi_lock]` or `MultiLock`)"
        })
    }
}

/// Every cycle [`check_lock_order`](super::check_lock_order) found (at most 100).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOrderCycles {
    cycles: Vec<LockOrderCycle>,
}

impl LockOrderCycles {
    pub(crate) fn new(cycles: Vec<LockOrderCycle>) -> Self {
        Self { cycles }
    }

    /// The cycles, as [`LockOrder::cycles`] lists them.
    pub fn cycles(&self) -> &[LockOrderCycle] {
        &self.cycles
    }
}

impl fmt::Display for LockOrderCycles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.cycles.len();
        write!(f, "{n} lock-order cycle{}", if n == 1 { "" } else { "s" })?;
        if n >= MAX_CYCLES {
            write!(f, " (the search stops at {MAX_CYCLES})")?;
        }
        f.write_str(":")?;
        for cycle in &self.cycles {
            write!(f, "\n- {cycle}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LockOrderCycles {}

/// Finds every elementary cycle once: from each class in turn, the paths back to it through
/// larger classes only, stepping only to classes that can still get back to it. A graph without
/// cycles is thereby searched in time linear in its size per class, not along its every path.
struct CycleSearch<'a> {
    edges: &'a [LockOrderEdge],
    /// For each class (sorted), the edges leaving it: (index of the class taken, index of the edge).
    next: Vec<Vec<(usize, usize)>>,
    /// For each class, the classes with an edge to it.
    prev: Vec<Vec<usize>>,
    /// The classes that can get back to the current start through larger classes.
    leads_back: Vec<bool>,
    on_path: Vec<bool>,
    path: Vec<usize>,
    found: Vec<LockOrderCycle>,
}

impl<'a> CycleSearch<'a> {
    fn new(edges: &'a [LockOrderEdge]) -> Self {
        let mut classes: Vec<&str> = edges.iter().flat_map(|edge| [edge.held.as_str(), edge.taken.as_str()]).collect();
        classes.sort_unstable();
        classes.dedup();
        let index = |class: &str| classes.binary_search(&class).expect("every class of an edge is listed");
        let mut next = vec![Vec::new(); classes.len()];
        let mut prev = vec![Vec::new(); classes.len()];
        for (i, edge) in edges.iter().enumerate() {
            let (from, to) = (index(&edge.held), index(&edge.taken));
            next[from].push((to, i));
            prev[to].push(from);
        }
        let n = classes.len();
        Self {
            edges,
            next,
            prev,
            leads_back: vec![false; n],
            on_path: vec![false; n],
            path: Vec::new(),
            found: Vec::new(),
        }
    }

    fn run(mut self) -> Vec<LockOrderCycle> {
        for start in 0..self.next.len() {
            if self.found.len() == MAX_CYCLES {
                break;
            }
            self.mark_leading_back(start);
            self.walk(start, start);
        }
        self.found
    }

    /// Marks the classes from `start` on that reach `start` through classes from `start` on.
    fn mark_leading_back(&mut self, start: usize) {
        self.leads_back.iter_mut().for_each(|marked| *marked = false);
        let mut stack = vec![start];
        while let Some(class) = stack.pop() {
            for &from in &self.prev[class] {
                if from >= start && !self.leads_back[from] {
                    self.leads_back[from] = true;
                    stack.push(from);
                }
            }
        }
    }

    fn walk(&mut self, start: usize, at: usize) {
        self.on_path[at] = true;
        for k in 0..self.next[at].len() {
            if self.found.len() == MAX_CYCLES {
                break;
            }
            let (to, edge) = self.next[at][k];
            self.path.push(edge);
            if to == start {
                let edges = self.path.iter().map(|&i| self.edges[i].clone()).collect();
                self.found.push(LockOrderCycle { edges });
            } else if to > start && self.leads_back[to] && !self.on_path[to] {
                self.walk(start, to);
            }
            self.path.pop();
        }
        self.on_path[at] = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Recipe;

    fn site(template: &'static str, function: &'static str) -> Option<Declaration> {
        Some(Declaration::new(template, Recipe::Mutex, function, "src/app.rs", 7))
    }

    fn edge(held: &str, taken: &str) -> LockOrderEdge {
        LockOrderEdge {
            held: held.into(),
            taken: taken.into(),
            count: 1,
            held_by: site("/held", "first"),
            taken_by: site("/taken", "second"),
            held_at: None,
            taken_at: None,
        }
    }

    fn cycles(edges: &[(&str, &str)]) -> Vec<Vec<String>> {
        let graph = LockOrder::new(edges.iter().map(|(a, b)| edge(a, b)).collect());
        graph.cycles().iter().map(|cycle| cycle.classes().map(str::to_owned).collect()).collect()
    }

    #[test]
    fn finds_every_cycle_once_from_its_smallest_class() {
        assert!(cycles(&[("/a", "/b"), ("/b", "/c"), ("/a", "/c")]).is_empty(), "one order, no cycle");
        assert_eq!(cycles(&[("/b", "/a"), ("/a", "/b")]), [["/a", "/b"]]);
        assert_eq!(cycles(&[("/a", "/a")]), [["/a"]], "a class taken under itself");
        assert_eq!(
            cycles(&[("/a", "/b"), ("/b", "/c"), ("/c", "/a"), ("/c", "/b"), ("/x", "/y")]),
            [vec!["/a", "/b", "/c"], vec!["/b", "/c"]]
        );
    }

    #[test]
    fn the_search_stops_at_the_limit() {
        // Every pair of 16 classes both ways: far more than the limit of cycles.
        let classes: Vec<String> = (0..16).map(|i| format!("/c{i:02}")).collect();
        let pairs: Vec<(&str, &str)> = classes
            .iter()
            .flat_map(|a| classes.iter().filter(move |b| *b != a).map(move |b| (a.as_str(), b.as_str())))
            .collect();
        assert_eq!(cycles(&pairs).len(), MAX_CYCLES);
    }

    #[test]
    fn a_large_graph_without_cycles_is_searched_without_walking_its_every_path() {
        // Every class before every later one: 2^38 paths from the first class, no cycle.
        let classes: Vec<String> = (0..40).map(|i| format!("/c{i:02}")).collect();
        let pairs: Vec<(&str, &str)> = (0..classes.len())
            .flat_map(|a| (a + 1..classes.len()).map(move |b| (a, b)))
            .map(|(a, b)| (classes[a].as_str(), classes[b].as_str()))
            .collect();
        assert!(cycles(&pairs).is_empty());
    }

    #[test]
    fn says_which_functions_made_each_edge() {
        let graph = LockOrder::new(vec![edge("/b", "/a"), edge("/a", "/b")]);
        let found = LockOrderCycles::new(graph.cycles());
        let text = found.to_string();
        assert!(
            text.starts_with(
                "1 lock-order cycle:\n- `/a` -> `/b` -> `/a`\n    `second` at src/app.rs:7 took `/b` while `first` at \
                 src/app.rs:7 held `/a`\n    `second` at src/app.rs:7 took `/a` while"
            ),
            "{text}"
        );
        assert!(text.contains("take them in one order everywhere"), "{text}");

        let mut api = edge("/a", "/a");
        (api.held_by, api.taken_by, api.count) = (None, None, 3);
        let api_edge = api.clone();
        let text = LockOrderCycles::new(LockOrder::new(vec![api]).cycles()).to_string();
        assert!(
            text.contains("`/a` -> `/a`\n    a call through the API took `/a` while a call through the API held `/a`"),
            "{text}"
        );
        assert!(text.contains("two calls with the values swapped can deadlock"), "{text}");
        assert_eq!(LockOrder::default().to_string(), "no lock was taken while another was held");
        assert!(LockOrder::new(vec![api_edge]).to_string().ends_with("held `/a` (3 times)"));
    }
}
