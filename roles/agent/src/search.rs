//! Web search for agents, from the provider the campaign configures: a
//! SearXNG-compatible JSON endpoint (`WEB_SEARCH_URL`), or the Brave Search
//! API with its key from `BRAVE_API_KEY` in the environment (never from the
//! env file). No provider, no `web_search` tool.

use std::time::Duration;

use hpcagent_common::config::{SearchProvider, Settings};
use serde::Serialize;

/// Results a search returns to the model.
const MAX_HITS: usize = 8;
/// Where the Brave Search API lives.
const BRAVE_URL: &str = "https://api.search.brave.com/res/v1/web/search";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

#[derive(Debug, Clone)]
pub enum Search {
    Searxng { url: String, http: reqwest::Client },
    Brave { key: String, http: reqwest::Client },
}

impl Search {
    /// The configured provider; an error when it is configured but unusable.
    pub fn from_settings(s: &Settings) -> Result<Option<Search>, String> {
        let http = || {
            reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .map_err(|e| e.to_string())
        };
        match s.web_search {
            SearchProvider::Off => Ok(None),
            SearchProvider::Searxng => {
                let url = s
                    .web_search_url
                    .clone()
                    .ok_or("WEB_SEARCH=searxng needs WEB_SEARCH_URL")?;
                Ok(Some(Search::Searxng {
                    url: url.trim_end_matches('/').to_string(),
                    http: http()?,
                }))
            }
            SearchProvider::Brave => {
                let key = std::env::var("BRAVE_API_KEY")
                    .map_err(|_| "WEB_SEARCH=brave needs BRAVE_API_KEY in the environment")?;
                Ok(Some(Search::Brave { key, http: http()? }))
            }
        }
    }

    pub async fn query(&self, query: &str) -> Result<Vec<Hit>, String> {
        let (request, results, fields) = match self {
            Search::Searxng { url, http } => (
                http.get(format!("{url}/search"))
                    .query(&[("q", query), ("format", "json")]),
                "/results",
                ("title", "url", "content"),
            ),
            Search::Brave { key, http } => (
                http.get(BRAVE_URL)
                    .query(&[("q", query)])
                    .header("X-Subscription-Token", key)
                    .header("Accept", "application/json"),
                "/web/results",
                ("title", "url", "description"),
            ),
        };
        let reply = request
            .send()
            .await
            .map_err(|e| format!("web search: {}", e.without_url()))?;
        if !reply.status().is_success() {
            return Err(format!("web search answered {}", reply.status()));
        }
        let body: serde_json::Value = reply.json().await.map_err(|e| format!("web search: {e}"))?;
        Ok(hits(&body, results, fields))
    }
}

fn hits(
    body: &serde_json::Value,
    results: &str,
    (title, url, snippet): (&str, &str, &str),
) -> Vec<Hit> {
    body.pointer(results)
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
        .take(MAX_HITS)
        .map(|r| Hit {
            title: r[title].as_str().unwrap_or_default().to_string(),
            url: r[url].as_str().unwrap_or_default().to_string(),
            snippet: r[snippet].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A SearXNG-compatible stand-in that answers any query with two results
    /// and remembers the request line.
    async fn searxng() -> (String, tokio::sync::oneshot::Receiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = socket.read(&mut buf).await.unwrap();
            let request = String::from_utf8_lossy(&buf[..n])
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            let body = r#"{"results":[{"title":"Tiling","url":"https://a","content":"block loops"},{"title":"SIMD","url":"https://b","content":"vectorise"}]}"#;
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(reply.as_bytes()).await.unwrap();
            let _ = tx.send(request);
        });
        (url, rx)
    }

    #[tokio::test]
    async fn searxng_results_become_hits() {
        let (url, request) = searxng().await;
        let search = Search::Searxng {
            url,
            http: reqwest::Client::new(),
        };
        let hits = search.query("loop tiling gemm").await.unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].title, "Tiling");
        assert_eq!(hits[1].snippet, "vectorise");
        let line = request.await.unwrap();
        assert!(
            line.starts_with("GET /search?q=loop+tiling+gemm&format=json"),
            "{line}"
        );
    }

    #[test]
    fn brave_results_are_read_from_their_own_shape() {
        let body = serde_json::json!({"web": {"results": [{"title": "t", "url": "u", "description": "d"}]}});
        let hits = hits(&body, "/web/results", ("title", "url", "description"));
        assert_eq!(
            hits,
            [Hit {
                title: "t".into(),
                url: "u".into(),
                snippet: "d".into()
            }]
        );
    }
}
