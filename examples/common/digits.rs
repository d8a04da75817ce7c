//! Loads the handwritten digits data set shipped in `data/digits.csv.gz` (UCI optical digits,
//! CC BY 4.0; see `data/README.md`): 1,797 images of 8x8 pixels (0..16) with labels 0..9, and
//! the fixed split the project uses (first 1,437 train, last 360 test).

use std::io::Read;

/// Pixels scaled to [0, 1] (64 per image, row-major) and labels.
pub struct Digits {
    pub images: Vec<f32>,
    pub labels: Vec<u8>,
}

impl Digits {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Images `[start, end)`.
    pub fn slice(&self, start: usize, end: usize) -> Digits {
        Digits {
            images: self.images[start * 64..end * 64].to_vec(),
            labels: self.labels[start..end].to_vec(),
        }
    }
}

/// Reads and parses the data set; errors name the file and line.
pub fn load() -> Result<Digits, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits.csv.gz");
    let file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .map_err(|e| format!("{path}: {e}"))?;
    let mut d = Digits {
        images: Vec::new(),
        labels: Vec::new(),
    };
    for (n, line) in text.lines().enumerate() {
        let vals: Vec<u8> = line
            .split(',')
            .map(|v| v.trim().parse::<u8>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{path}: line {}: {e}", n + 1))?;
        if vals.len() != 65 || vals[64] > 9 || vals[..64].iter().any(|&p| p > 16) {
            return Err(format!(
                "{path}: line {}: expected 64 pixels in 0..16 and a label in 0..9",
                n + 1
            ));
        }
        d.images
            .extend(vals[..64].iter().map(|&p| f32::from(p) / 16.0));
        d.labels.push(vals[64]);
    }
    Ok(d)
}

/// The project's fixed split: (train = first 1,437, test = last 360).
pub fn split(d: &Digits) -> (Digits, Digits) {
    (d.slice(0, 1437), d.slice(1437, d.len()))
}
