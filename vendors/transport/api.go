package transport

import (
	"strings"

	"github.com/ontopix/sluice/vendors"
)

// API is a vendor endpoint the Transport knows how to estimate and settle.
type API uint8

// The APIs.
const (
	// UnknownAPI is any other endpoint (listing models, files, batches…).
	UnknownAPI API = iota
	// ChatCompletions is OpenAI's POST …/chat/completions, also Azure
	// OpenAI's /openai/deployments/{name}/chat/completions and the
	// OpenAI-compatible APIs of other vendors.
	ChatCompletions
	// Responses is OpenAI's POST …/responses.
	Responses
	// Embeddings is OpenAI's POST …/embeddings (and Azure's).
	Embeddings
	// Messages is Anthropic's POST /v1/messages.
	Messages
)

// String returns the API's name, e.g. "chat.completions".
func (a API) String() string {
	switch a {
	case ChatCompletions:
		return "chat.completions"
	case Responses:
		return "responses"
	case Embeddings:
		return "embeddings"
	case Messages:
		return "messages"
	}
	return "unknown"
}

// Endpoint is what a request's vendor, method and path say about it.
type Endpoint struct {
	// API is the endpoint; UnknownAPI when not one of the known ones.
	API API
	// Deployment is the Azure OpenAI deployment named in the path
	// (/openai/deployments/{name}/…); empty otherwise.
	Deployment string
}

// ParseEndpoint recognises the endpoint of a request to vendor v with the
// given method and URL path. Anthropic's dialect has Messages only; every
// other vendor is read as OpenAI's (chat completions, responses,
// embeddings), and Azure's deployment paths name the deployment. A request
// that is not a POST is UnknownAPI.
func ParseEndpoint(v vendors.Vendor, method, path string) Endpoint {
	if method != "POST" {
		return Endpoint{}
	}
	path = strings.TrimSuffix(path, "/")
	if v == vendors.Anthropic {
		if strings.HasSuffix(path, "/v1/messages") {
			return Endpoint{API: Messages}
		}
		return Endpoint{}
	}
	var e Endpoint
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		e.API = ChatCompletions
	case strings.HasSuffix(path, "/responses"):
		e.API = Responses
	case strings.HasSuffix(path, "/embeddings"):
		e.API = Embeddings
	default:
		return Endpoint{}
	}
	if i := strings.Index(path, "/openai/deployments/"); i >= 0 {
		rest := path[i+len("/openai/deployments/"):]
		if name, _, ok := strings.Cut(rest, "/"); ok && name != "" {
			e.Deployment = name
		}
	}
	return e
}
