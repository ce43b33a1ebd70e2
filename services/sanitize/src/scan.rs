//! A literal scanner for the short markers the filters key on.
//!
//! An Aho-Corasick automaton would search about as fast, but building one costs more than the
//! whole search in the hook client, which cleans one payload per process. This scanner is built
//! in microseconds: a bit set of the (lower-cased) first two bytes of every marker rejects almost
//! every position with one lookup, and the few survivors are compared with the markers starting
//! with that byte, ASCII case-insensitively.

/// A set of markers, indexed by their first bytes.
pub(crate) struct Scanner {
    markers: Vec<Vec<u8>>,
    /// Lower-cased second byte and id of the markers longer than one byte, by lower-cased first byte.
    by_first_byte: Vec<Vec<(u8, u16)>>,
    /// One bit per lower-cased two-byte prefix of a marker longer than one byte.
    pairs: Vec<u64>,
    /// Ids of the one-byte markers, by lower-cased byte.
    single: Vec<Vec<u16>>,
    /// Whether a byte (as is, not lower-cased) starts a one-byte marker, to skip `single` fast.
    single_start: [bool; 256],
}

fn pair_index(first: u8, second: u8) -> usize {
    usize::from(first.to_ascii_lowercase()) << 8 | usize::from(second.to_ascii_lowercase())
}

impl Scanner {
    /// Builds a scanner for `markers`; a marker's index in the sequence is its id in [`Scanner::scan`].
    pub(crate) fn new<'m>(markers: impl IntoIterator<Item = &'m str>) -> Scanner {
        let markers: Vec<Vec<u8>> = markers
            .into_iter()
            .map(|marker| marker.as_bytes().to_ascii_lowercase())
            .collect();
        let mut by_first_byte = vec![Vec::new(); 256];
        let mut single = vec![Vec::new(); 256];
        let mut pairs = vec![0u64; 65536 / 64];
        let mut single_start = [false; 256];
        for (id, marker) in markers.iter().enumerate() {
            let id = u16::try_from(id).expect("fewer than 65536 markers");
            match marker.as_slice() {
                [] => {}
                [only] => {
                    single[usize::from(*only)].push(id);
                    single_start[usize::from(*only)] = true;
                    single_start[usize::from(only.to_ascii_uppercase())] = true;
                }
                [first, second, ..] => {
                    by_first_byte[usize::from(*first)].push((*second, id));
                    let pair = pair_index(*first, *second);
                    pairs[pair / 64] |= 1 << (pair % 64);
                }
            }
        }
        Scanner {
            markers,
            by_first_byte,
            pairs,
            single,
            single_start,
        }
    }

    /// Calls `found(id, start, end)` for every occurrence of every marker, overlapping ones
    /// included, in order of their start.
    pub(crate) fn scan(&self, text: &[u8], mut found: impl FnMut(usize, usize, usize)) {
        for (start, window) in text.windows(2).enumerate() {
            let (first, second) = (window[0], window[1]);
            if self.single_start[usize::from(first)] {
                self.report_single(first, start, &mut found);
            }
            let pair = pair_index(first, second);
            if self.pairs[pair / 64] & (1 << (pair % 64)) == 0 {
                continue;
            }
            let second = second.to_ascii_lowercase();
            for &(candidate, id) in &self.by_first_byte[usize::from(first.to_ascii_lowercase())] {
                if candidate != second {
                    continue;
                }
                let marker = &self.markers[usize::from(id)];
                let end = start + marker.len();
                if end <= text.len() && text[start..end].eq_ignore_ascii_case(marker) {
                    found(usize::from(id), start, end);
                }
            }
        }
        // The last byte can only start a one-byte marker.
        if let Some(&last) = text.last()
            && self.single_start[usize::from(last)]
        {
            self.report_single(last, text.len() - 1, &mut found);
        }
    }

    fn report_single(&self, byte: u8, at: usize, found: &mut impl FnMut(usize, usize, usize)) {
        for &id in &self.single[usize::from(byte.to_ascii_lowercase())] {
            found(usize::from(id), at, at + 1);
        }
    }
}
