//! A memo of values worked out from a text, up to a number of texts: for what every record
//! repeats from a small vocabulary (`dc:type` values, set specs), worked out once per text rather
//! than once per record. Bounded, because nothing stops a repository from putting free text
//! there.

// foldhash rather than std's SipHash: looked up for every record, keyed by what the upstream
// sends but never exposed to it, where SipHash's resistance to chosen keys buys nothing.
use foldhash::HashMap;

/// Values by text, for up to `max` texts.
#[derive(Debug)]
pub struct Memo<V> {
    seen: HashMap<Box<str>, V>,
    max: usize,
}

impl<V: Copy> Memo<V> {
    /// An empty memo that remembers up to `max` texts.
    pub fn new(max: usize) -> Self {
        Self {
            seen: HashMap::default(),
            max,
        }
    }

    /// The value of `text`: remembered, or `work_out` and remembered while there is room.
    pub fn get(&mut self, text: &str, work_out: impl FnOnce() -> V) -> V {
        if let Some(&v) = self.seen.get(text) {
            return v;
        }
        let v = work_out();
        if self.seen.len() < self.max {
            self.seen.insert(text.into(), v);
        }
        v
    }

    /// Texts remembered.
    #[cfg(test)]
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_worked_out_once_while_there_is_room() {
        let mut memo = Memo::new(2);
        let mut calls = 0;
        let mut get = |memo: &mut Memo<usize>, text: &str| {
            memo.get(text, || {
                calls += 1;
                text.len()
            })
        };
        assert_eq!(get(&mut memo, "ab"), 2);
        assert_eq!(get(&mut memo, "ab"), 2);
        assert_eq!(get(&mut memo, "abc"), 3);
        assert_eq!(get(&mut memo, "abcd"), 4);
        assert_eq!(get(&mut memo, "abcd"), 4);
        assert_eq!(memo.remembered(), 2);
        assert_eq!(calls, 4, "the third text is worked out each time");
    }
}
