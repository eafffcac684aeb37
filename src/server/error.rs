//! Errors as OpenAI sends them: an HTTP status and `{"error": {"message", "type", "param",
//! "code"}}`. Every way a request can be refused goes through here, so no handler answers a
//! client's mistake with a 5xx.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    /// Seconds to wait, sent as `Retry-After` (a full queue).
    pub retry_after: Option<u32>,
}

pub type ApiResult<T> = std::result::Result<T, ApiError>;

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, kind, message: message.into(), param: None, code: None, retry_after: None }
    }

    /// 400: the request is malformed or a parameter is out of range.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 about one parameter.
    pub fn param(param: &str, message: impl Into<String>) -> ApiError {
        ApiError { param: Some(param.to_string()), ..ApiError::invalid(message) }
    }

    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    /// 401: `--api-key` is set and the request's bearer token is missing or wrong.
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "authentication_error", message).with_code("invalid_api_key")
    }

    /// 404: no such model.
    pub fn model_not_found(name: &str) -> ApiError {
        let message = format!("the model `{name}` does not exist; GET /v1/models lists the served one");
        ApiError {
            param: Some("model".into()),
            ..ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", message)
        }
        .with_code("model_not_found")
    }

    /// 404: no such route.
    pub fn no_route(method: &str, path: &str) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found_error", format!("no route for {method} {path}"))
    }

    /// 405: the route exists with another method.
    pub fn method_not_allowed(method: &str, path: &str) -> ApiError {
        ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "invalid_request_error", format!("{path} does not take {method}"))
    }

    /// 413: the body is over the size limit.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("request body over {limit} bytes"),
        )
        .with_code("request_too_large")
    }

    /// 429: as many requests are running or waiting as `--max-queue` allows.
    pub fn queue_full(max_queue: usize) -> ApiError {
        let message = format!("the server is at its limit of {max_queue} running or waiting requests; retry shortly");
        ApiError { retry_after: Some(1), ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", message) }
            .with_code("queue_full")
    }

    /// 503: the engine cannot take requests (it stopped, or its channel is full).
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError { retry_after: Some(1), ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message) }
    }

    /// 500: the engine failed on a valid request (a bug or a device failure, never bad input).
    pub fn engine(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// The error object alone (also sent inside a stream that fails after it began).
    pub fn body(&self) -> serde_json::Value {
        json!({ "error": { "message": self.message, "type": self.kind, "param": self.param, "code": self.code } })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = json_response(self.status, &self.body());
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// A JSON body with its content type.
pub fn json_response(status: StatusCode, value: &serde_json::Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
}
