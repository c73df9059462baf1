package transport

import (
	"bytes"
	"encoding/base64"
	"image"
	_ "image/gif"  // registers GIF for image.DecodeConfig
	_ "image/jpeg" // registers JPEG
	_ "image/png"  // registers PNG
	"math"
	"strings"
)

// Image estimates, in tokens, when the image's size is not known (a URL,
// or a format the standard library cannot read, such as WebP).
const (
	// UnknownOpenAIImageTokens is a 768×768 image at high detail by
	// OpenAI's tile formula: 4 tiles × 170 + 85.
	UnknownOpenAIImageTokens = 765
	// UnknownAnthropicImageTokens is Anthropic's largest image before it
	// is scaled down: about 1.15 megapixels / 750 ≈ 1600 tokens.
	UnknownAnthropicImageTokens = 1600
)

// image returns the token estimate of m when it is an image content part:
// OpenAI chat {"type":"image_url","image_url":{"url","detail"}}, Responses
// {"type":"input_image","image_url","detail"}, Anthropic
// {"type":"image","source":{"type":"base64","data"} or {"type":"url"}}.
func (c *counter) image(m map[string]any) (int64, bool) {
	t, _ := m["type"].(string)
	switch t {
	case "image_url":
		iu, _ := m["image_url"].(map[string]any)
		url, _ := iu["url"].(string)
		detail, _ := iu["detail"].(string)
		return openAIImage(url, detail), true
	case "input_image":
		url, _ := m["image_url"].(string)
		detail, _ := m["detail"].(string)
		return openAIImage(url, detail), true
	case "image":
		src, _ := m["source"].(map[string]any)
		data, _ := src["data"].(string)
		w, h, ok := imageSize(data)
		if !ok {
			return UnknownAnthropicImageTokens, true
		}
		return anthropicImage(w, h), true
	}
	return 0, false
}

// openAIImage applies OpenAI's published formula for GPT-4o-class models:
// low detail is 85 tokens; otherwise the image is scaled to fit 2048×2048,
// then its shorter side to 768, and costs 170 per 512-pixel tile plus 85.
func openAIImage(url, detail string) int64 {
	if detail == "low" {
		return 85
	}
	data, isData := strings.CutPrefix(url, "data:")
	if !isData {
		return UnknownOpenAIImageTokens
	}
	_, b64, _ := strings.Cut(data, ",")
	w, h, ok := imageSize(b64)
	if !ok {
		return UnknownOpenAIImageTokens
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / math.Min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := math.Ceil(fw/512) * math.Ceil(fh/512)
	return int64(tiles)*170 + 85
}

// anthropicImage applies Anthropic's published formula: width × height /
// 750 tokens, after scaling the long edge down to 1568 pixels.
func anthropicImage(w, h int) int64 {
	fw, fh := float64(w), float64(h)
	if s := 1568 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return max(1, int64(math.Ceil(fw*fh/750)))
}

// imageSize reads the dimensions of a base64 PNG, JPEG or GIF from its
// first 64 KiB.
func imageSize(b64 string) (w, h int, ok bool) {
	if b64 == "" {
		return 0, 0, false
	}
	const prefix = 64 << 10
	if len(b64) > prefix {
		b64 = b64[:prefix]
	}
	b64 = b64[:len(b64)/4*4]
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 0, 0, false
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}
