//! A literal scanner for the handful of short markers the filters key on.
//!
//! An Aho-Corasick automaton would search faster, but building one costs more than the whole
//! search in the hook client, which cleans one payload per process. This scanner is built from a
//! first-byte table in microseconds and checks, at each position, only the markers starting with
//! that byte (ASCII case-insensitively).

/// A set of markers, indexed by their lower-cased first byte.
pub(crate) struct Scanner {
    markers: Vec<Vec<u8>>,
    by_first_byte: Vec<Vec<u16>>,
}

impl Scanner {
    /// Builds a scanner for `markers`; a marker's index in the slice is its id in [`Scanner::scan`].
    pub(crate) fn new<'m>(markers: impl IntoIterator<Item = &'m str>) -> Scanner {
        let markers: Vec<Vec<u8>> = markers
            .into_iter()
            .map(|marker| marker.as_bytes().to_ascii_lowercase())
            .collect();
        let mut by_first_byte = vec![Vec::new(); 256];
        for (id, marker) in markers.iter().enumerate() {
            if let Some(&first) = marker.first() {
                let id = u16::try_from(id).expect("fewer than 65536 markers");
                by_first_byte[usize::from(first)].push(id);
            }
        }
        Scanner {
            markers,
            by_first_byte,
        }
    }

    /// Calls `found(id, start, end)` for every occurrence of every marker, overlapping ones included,
    /// in order of their start.
    pub(crate) fn scan(&self, text: &[u8], mut found: impl FnMut(usize, usize, usize)) {
        for (start, &byte) in text.iter().enumerate() {
            for &id in &self.by_first_byte[usize::from(byte.to_ascii_lowercase())] {
                let marker = &self.markers[usize::from(id)];
                let end = start + marker.len();
                if end <= text.len() && text[start..end].eq_ignore_ascii_case(marker) {
                    found(usize::from(id), start, end);
                }
            }
        }
    }
}
