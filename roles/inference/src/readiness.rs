//! Whether a vLLM server can serve: `/health` answers 200, then `/v1/models`
//! lists the served name. `/v1/models` alone is not enough: the API process
//! answers it before the engine has loaded the model.

use std::time::Duration;

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Healthy, and serving the model.
    Ready,
    /// Not yet: why.
    NotYet(String),
}

pub struct Prober {
    http: reqwest::Client,
    base: String,
    model: String,
}

impl Prober {
    /// Probes the server at `base` (`http://host:port`) for `model`.
    pub fn new(base: &str, model: &str) -> Prober {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("a plain HTTP client builds");
        Prober {
            http,
            base: base.trim_end_matches('/').to_string(),
            model: model.to_string(),
        }
    }

    pub async fn probe(&self) -> Probe {
        match self.health().await {
            Ok(()) => match self.models().await {
                Ok(models) if models.contains(&self.model) => Probe::Ready,
                Ok(models) => {
                    Probe::NotYet(format!("/v1/models lists {models:?}, not {:?}", self.model))
                }
                Err(why) => Probe::NotYet(why),
            },
            Err(why) => Probe::NotYet(why),
        }
    }

    /// `/health` alone: for watching a server that was ready.
    pub async fn health(&self) -> Result<(), String> {
        let url = format!("{}/health", self.base);
        match self.http.get(&url).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!("/health answers {}", r.status())),
            Err(e) => Err(format!("/health: {}", without_url(e))),
        }
    }

    async fn models(&self) -> Result<Vec<String>, String> {
        let url = format!("{}/v1/models", self.base);
        let reply = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| format!("/v1/models: {}", without_url(e)))?;
        if !reply.status().is_success() {
            return Err(format!("/v1/models answers {}", reply.status()));
        }
        let body: serde_json::Value = reply.json().await.map_err(|e| format!("/v1/models: {e}"))?;
        Ok(body["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect())
    }
}

fn without_url(e: reqwest::Error) -> String {
    if e.is_connect() {
        "nothing listens yet".into()
    } else if e.is_timeout() {
        "no answer in 5 s".into()
    } else {
        e.without_url().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An HTTP server answering `/health` with `health` and `/v1/models`
    /// with `models`: a stand-in for a vLLM still loading, or one serving
    /// another model (the real server is tested in tests/inference_vllm.rs).
    async fn stand_in(health: u16, models: &'static str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = vec![0u8; 4096];
                let n = socket.read(&mut request).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..n]);
                let (status, body) = if request.starts_with("GET /health") {
                    (health, String::new())
                } else {
                    (200, format!(r#"{{"object":"list","data":[{models}]}}"#))
                };
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            }
        });
        base
    }

    #[tokio::test]
    async fn ready_needs_health_and_the_served_model() {
        let base = stand_in(200, r#"{"id":"tiny"}"#).await;
        assert_eq!(Prober::new(&base, "tiny").probe().await, Probe::Ready);
        let Probe::NotYet(why) = Prober::new(&base, "other").probe().await else {
            panic!("another model is not ready")
        };
        assert!(why.contains("not \"other\""), "{why}");
        let loading = stand_in(503, r#"{"id":"tiny"}"#).await;
        let Probe::NotYet(why) = Prober::new(&loading, "tiny").probe().await else {
            panic!("models listed while /health fails is not ready")
        };
        assert!(why.contains("/health answers 503"), "{why}");
        let Probe::NotYet(why) = Prober::new("http://127.0.0.1:1", "tiny").probe().await else {
            panic!("nothing listening is not ready")
        };
        assert!(why.contains("nothing listens"), "{why}");
    }
}
