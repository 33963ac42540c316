//! `primaryLocationLineHash`, computed exactly as GitHub's upload action does
//! (github/codeql-action, `src/fingerprints.ts`, `hash`): a rolling hash over the first 100
//! non-space, non-tab UTF-16 code units from the start of each line (CR and CRLF read as LF,
//! then an end marker and zeros), suffixed `:n` for the n-th line with an equal hash. Supplying
//! it ourselves keeps alerts matched across runs even where the action cannot read the file.

const BLOCK_SIZE: usize = 100;
const MOD: i64 = 37;
const TAB: u16 = b'\t' as u16;
const SPACE: u16 = b' ' as u16;
const LF: u16 = b'\n' as u16;
const CR: u16 = b'\r' as u16;
/// What the action feeds after the last character (JavaScript's 65535 sentinel).
const EOF: u16 = 65535;

/// The hash of every line of `text`, index 0 for line 1.
pub fn line_hashes(text: &str) -> Vec<String> {
    let mut hasher = Hasher::new();
    for unit in text.encode_utf16() {
        hasher.process(unit);
    }
    hasher.process(EOF);
    hasher.flush();
    let mut out = Vec::new();
    for (line, hash) in hasher.out {
        // Lines are reported in order, one each; a gap would mean a bug in the port.
        if line == out.len() + 1 {
            out.push(hash);
        }
    }
    out
}

struct Hasher {
    window: [u16; BLOCK_SIZE],
    /// The line that starts at each window slot, 0 for none.
    line_numbers: [usize; BLOCK_SIZE],
    hash: i64,
    first_mod: i64,
    index: usize,
    line_number: usize,
    line_start: bool,
    prev_cr: bool,
    counts: std::collections::HashMap<String, usize>,
    out: Vec<(usize, String)>,
}

impl Hasher {
    fn new() -> Self {
        let first_mod = (0..BLOCK_SIZE).fold(1i64, |m, _| m.wrapping_mul(MOD));
        Hasher {
            window: [0; BLOCK_SIZE],
            line_numbers: [0; BLOCK_SIZE],
            hash: 0,
            first_mod,
            index: 0,
            line_number: 0,
            line_start: true,
            prev_cr: false,
            counts: std::collections::HashMap::new(),
            out: Vec::new(),
        }
    }

    fn output(&mut self) {
        // `Long.toUnsigned().toString(16)`: the two's-complement bits, lower-case, no padding.
        let value = format!("{:x}", self.hash as u64);
        let count = self.counts.entry(value.clone()).or_insert(0);
        *count += 1;
        let line = self.line_numbers.get(self.index).copied().unwrap_or(0);
        self.out.push((line, format!("{value}:{count}")));
        if let Some(slot) = self.line_numbers.get_mut(self.index) {
            *slot = 0;
        }
    }

    fn update(&mut self, current: u16) {
        let begin = self.window.get(self.index).copied().unwrap_or(0);
        if let Some(slot) = self.window.get_mut(self.index) {
            *slot = current;
        }
        self.hash = MOD
            .wrapping_mul(self.hash)
            .wrapping_add(i64::from(current))
            .wrapping_sub(self.first_mod.wrapping_mul(i64::from(begin)));
        self.index = (self.index + 1) % BLOCK_SIZE;
    }

    fn process(&mut self, unit: u16) {
        if unit == SPACE || unit == TAB || (self.prev_cr && unit == LF) {
            self.prev_cr = false;
            return;
        }
        let current = if unit == CR {
            self.prev_cr = true;
            LF
        } else {
            self.prev_cr = false;
            unit
        };
        if self.line_numbers.get(self.index).is_some_and(|&l| l != 0) {
            self.output();
        }
        if self.line_start {
            self.line_start = false;
            self.line_number += 1;
            if let Some(slot) = self.line_numbers.get_mut(self.index) {
                *slot = self.line_number;
            }
        }
        if current == LF {
            self.line_start = true;
        }
        self.update(current);
    }

    fn flush(&mut self) {
        for _ in 0..BLOCK_SIZE {
            if self.line_numbers.get(self.index).is_some_and(|&l| l != 0) {
                self.output();
            }
            self.update(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The action's own test vectors (`src/fingerprints.test.ts`).
    #[test]
    fn matches_the_upload_actions_vectors() {
        assert_eq!(line_hashes(""), ["c129715d7a2bc9a3:1"]);
        assert_eq!(
            line_hashes(" a\nb\n  \t\tc\n d"),
            [
                "271789c17abda88f:1",
                "54703d4cd895b18:1",
                "180aee12dab6264:1",
                "a23a3dc5e078b07b:1"
            ]
        );
        let expected = [
            "e9496ae3ebfced30:1",
            "fb7c023a8b9ccb3f:1",
            "ce8ba1a563dcdaca:1",
            "e20e36e16fcb0cc8:1",
            "b3edc88f2938467e:1",
            "c8e28b0b4002a3a0:1",
            "c129715d7a2bc9a3:1",
        ];
        for text in [
            " hello; \t\nworld!!!\n\n\n  \t\tGreetings\n End\n",
            " hello; \t\nworld!!!\r\r\r  \t\tGreetings\r End\r",
            " hello; \t\r\nworld!!!\r\n\r\n\r\n  \t\tGreetings\r\n End\r\n",
        ] {
            assert_eq!(line_hashes(text), expected, "{text:?}");
        }
    }

    #[test]
    fn equal_lines_are_numbered() {
        let hashes = line_hashes(&"Lorem ipsum dolor sit amet.\n".repeat(10));
        assert_eq!(hashes[0], "a7f2ff13bc495cf2:1");
        assert_eq!(hashes[5], "a7f2ff13bc495cf2:6");
        assert_eq!(hashes[6], "a7f2ff1481e87703:1");
        assert_eq!(hashes[10], "c129715d7a2bc9a3:1");
    }

    /// By hand from the algorithm: the window of the single line of "ab" is `a`, `b`, the end
    /// marker, then 97 zeros, so its hash is 97·37^99 + 98·37^98 + 65535·37^97 (mod 2^64).
    #[test]
    fn one_line_by_hand() {
        let pow = |e: u32| (0..e).fold(1u64, |m, _| m.wrapping_mul(37));
        let expected = 97u64
            .wrapping_mul(pow(99))
            .wrapping_add(98u64.wrapping_mul(pow(98)))
            .wrapping_add(65535u64.wrapping_mul(pow(97)));
        assert_eq!(line_hashes("ab"), [format!("{expected:x}:1")]);
        // Whitespace is not part of the hash.
        assert_eq!(line_hashes("  a b"), line_hashes("ab"));
    }
}
