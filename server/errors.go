package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mlxgo/mlxgo/gen"
)

// Sentinel errors the handlers and the engine return; statusOf maps them.
var (
	// ErrQueueFull means --max-queue requests are already waiting.
	ErrQueueFull = errors.New("the server is busy: too many requests are waiting")
	// ErrShuttingDown means the server stopped accepting work.
	ErrShuttingDown = errors.New("the server is shutting down")
	errTimeout      = errors.New("the request took longer than the server's request timeout")
)

// apiError is an error a client can act on, already in OpenAI's terms.
type apiError struct {
	status  int
	typ     string // invalid_request_error, authentication_error, ...
	param   string // the request field at fault, if any
	code    string
	message string
}

func (e *apiError) Error() string { return e.message }

// invalidf is a 400 naming the request field at fault.
func invalidf(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, message: fmt.Sprintf(format, args...)}
}

// unsupported is the 400 for a field that we read but cannot honour: never
// silently ignored, so a client never believes it got what it asked for.
func unsupported(param, why string) *apiError {
	e := invalidf(param, "%s is not supported by mlxgo serve: %s", param, why)
	e.code = "unsupported_parameter"
	return e
}

// statusOf is the one place that maps an error to an HTTP status and an
// OpenAI error object.
func statusOf(err error) *apiError {
	var ae *apiError
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
			message: fmt.Sprintf("the request body is larger than the limit of %d bytes", mbe.Limit)}
	case errors.As(err, &se):
		return invalidf("", "cannot parse the request body as JSON: %v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		// encoding/json names fields of embedded structs by the Go type.
		field := strings.TrimPrefix(te.Field, "commonFields.")
		return invalidf(field, "cannot parse the request: field %q must be %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.Is(err, gen.ErrContext):
		e := invalidf("messages", "%v", err)
		e.code = "context_length_exceeded"
		return e
	case errors.Is(err, ErrQueueFull):
		return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "queue_full", message: err.Error()}
	case errors.Is(err, ErrRankLost):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "rank_failed", message: err.Error()}
	case errors.Is(err, ErrShuttingDown):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", message: err.Error()}
	case errors.Is(err, errTimeout), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusGatewayTimeout, typ: "server_error", code: "timeout", message: errTimeout.Error()}
	default:
		return &apiError{status: http.StatusInternalServerError, typ: "server_error", message: "cannot complete the request: " + err.Error()}
	}
}

// jsonKind names a Go kind the way a JSON client thinks of it.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "float32", "float64":
		return "a number"
	default:
		return "an integer"
	}
}

// errorBody is OpenAI's error shape; param and code are null when unset.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func (e *apiError) body() errorBody {
	var b errorBody
	b.Error.Message, b.Error.Type = e.message, e.typ
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = &e.code
	}
	return b
}

// writeError writes err as an OpenAI error response.
func writeError(w http.ResponseWriter, err error) *apiError {
	ae := statusOf(err)
	if ae.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if ae.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mlxgo"`)
	}
	writeJSON(w, ae.status, ae.body())
	return ae
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"cannot encode the response","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
