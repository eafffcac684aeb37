//! The router and the small endpoints: models, health, tokenize, detokenize, metrics and the
//! OpenAPI document. Bodies are read here with the size limit, and the API key is checked here.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::server::error::{ApiError, ApiResult, json_response};
use crate::server::params::{boolean, field, object, string};
use crate::server::{MAX_BODY, Shared, complete};

type Ctx = State<Arc<Shared>>;

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/v1/models/{model}", get(model))
        .route("/health", get(health))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .fallback(|method: Method, uri: Uri| async move { ApiError::no_route(method.as_str(), uri.path()) })
        .method_not_allowed_fallback(|method: Method, uri: Uri| async move {
            ApiError::method_not_allowed(method.as_str(), uri.path())
        })
        .with_state(shared)
}

/// With `--api-key`, `Authorization: Bearer KEY` must match.
fn authorize(shared: &Shared, headers: &HeaderMap) -> ApiResult<()> {
    let Some(key) = &shared.api_key else { return Ok(()) };
    let given =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(g) if g.trim() == key => Ok(()),
        Some(_) => Err(ApiError::unauthorized("the API key is wrong")),
        None => Err(ApiError::unauthorized("this server needs an API key: send `Authorization: Bearer KEY`")),
    }
}

/// The body, up to MAX_BODY bytes (413 above), after the key check.
async fn body(shared: &Shared, headers: &HeaderMap, body: Body) -> ApiResult<Bytes> {
    authorize(shared, headers)?;
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(ApiError::too_large(MAX_BODY));
    }
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| ApiError::too_large(MAX_BODY))
}

async fn chat(State(shared): Ctx, headers: HeaderMap, raw: Body) -> Response {
    match body(&shared, &headers, raw).await {
        Ok(bytes) => complete::handle(shared, bytes, true).await,
        Err(e) => reject(&shared, e),
    }
}

async fn completions(State(shared): Ctx, headers: HeaderMap, raw: Body) -> Response {
    match body(&shared, &headers, raw).await {
        Ok(bytes) => complete::handle(shared, bytes, false).await,
        Err(e) => reject(&shared, e),
    }
}

fn reject(shared: &Shared, e: ApiError) -> Response {
    shared.metrics.count(crate::server::metrics::Outcome::Rejected);
    e.into_response()
}

fn model_card(shared: &Shared) -> Value {
    json!({ "id": shared.model_name, "object": "model", "created": shared.started, "owned_by": "ultra" })
}

async fn models(State(shared): Ctx, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&shared, &headers) {
        return e.into_response();
    }
    json_response(StatusCode::OK, &json!({ "object": "list", "data": [model_card(&shared)] }))
}

async fn model(State(shared): Ctx, headers: HeaderMap, Path(name): Path<String>) -> Response {
    if let Err(e) = authorize(&shared, &headers) {
        return e.into_response();
    }
    if name != shared.model_name {
        return ApiError::model_not_found(&name).into_response();
    }
    json_response(StatusCode::OK, &model_card(&shared))
}

/// 200 while the engine thread takes jobs; 503 once it has stopped (the process then only
/// answers errors, and a supervisor should restart it).
async fn health(State(shared): Ctx) -> Response {
    if shared.jobs.is_closed() {
        return ApiError::unavailable("the engine has stopped").into_response();
    }
    json_response(StatusCode::OK, &json!({ "status": "ok" }))
}

/// llama-server's shape: `{"content": TEXT, "parse_special": true, "with_pieces": false}` →
/// `{"tokens": [ids]}` (or `[{"id", "piece"}]` with pieces).
async fn tokenize(State(shared): Ctx, headers: HeaderMap, raw: Body) -> Response {
    let run = async {
        let map = object(&body(&shared, &headers, raw).await?)?;
        let text = string(&map, "content")?.ok_or_else(|| ApiError::param("content", "`content` is required"))?;
        let parse_special = boolean(&map, "parse_special")?.unwrap_or(true);
        let ids =
            shared.tokenizer.encode(text, parse_special).map_err(|e| ApiError::param("content", e.to_string()))?;
        let tokens: Value = if boolean(&map, "with_pieces")?.unwrap_or(false) {
            ids.iter().map(|&id| json!({ "id": id, "piece": shared.tokenizer.decode_lossy(&[id]) })).collect()
        } else {
            json!(ids)
        };
        Ok::<_, ApiError>(json!({ "tokens": tokens }))
    };
    match run.await {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => e.into_response(),
    }
}

/// `{"tokens": [ids]}` → `{"content": TEXT}`.
async fn detokenize(State(shared): Ctx, headers: HeaderMap, raw: Body) -> Response {
    let run = async {
        let map = object(&body(&shared, &headers, raw).await?)?;
        let bad = || ApiError::param("tokens", format!("`tokens` must be an array of ids below {}", shared.vocab));
        let ids = match field(&map, "tokens") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_u64().filter(|&id| (id as usize) < shared.vocab).map(|id| id as u32).ok_or_else(bad))
                .collect::<ApiResult<Vec<u32>>>()?,
            _ => return Err(bad()),
        };
        Ok(json!({ "content": shared.tokenizer.decode_lossy(&ids) }))
    };
    match run.await {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => e.into_response(),
    }
}

async fn metrics(State(shared): Ctx, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&shared, &headers) {
        return e.into_response();
    }
    let content_type = "text/plain; version=0.0.4; charset=utf-8";
    ([(header::CONTENT_TYPE, content_type)], shared.metrics.render()).into_response()
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], include_str!("openapi.json")).into_response()
}
