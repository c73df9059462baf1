// Command transport calls OpenAI and Anthropic through Sluice's metering
// transport, as every replica of a fleet would (fleet.go is the code the
// user guide shows). By default it talks to two local vendor simulators,
// so it runs offline:
//
//	go run ./examples/transport
//
// With -live it calls the real APIs (OPENAI_API_KEY and ANTHROPIC_API_KEY
// from the environment) on the store SLUICE_STORE names.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

func main() {
	live := flag.Bool("live", false, "call the real APIs instead of local simulators")
	limitsFile := flag.String("limits", "examples/transport/limits.yaml", "the limits file")
	flag.Parse()
	if err := run(*live, *limitsFile); err != nil {
		fmt.Fprintln(os.Stderr, "transport:", err)
		os.Exit(1)
	}
}

func run(live bool, limitsFile string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	storeURL, oaOpts, anOpts := os.Getenv("SLUICE_STORE"), []option.RequestOption(nil), []aoption.RequestOption(nil)
	var topts []transport.Option
	if !live {
		storeURL = "memory://"
		oaURL, err := serve(vendorsim.OpenAI)
		if err != nil {
			return err
		}
		anURL, err := serve(vendorsim.Anthropic)
		if err != nil {
			return err
		}
		// The simulators' addresses are custom base URLs: route them.
		topts = append(topts, transport.WithRoute(transport.Route{Host: oaURL, Vendor: vendors.OpenAI}),
			transport.WithRoute(transport.Route{Host: anURL, Vendor: vendors.Anthropic}),
			transport.WithEvents(func(_ context.Context, ev transport.Event) {
				fmt.Printf("  %s %s: %s, admitted %v, final %v\n", ev.Vendor, ev.API, ev.Outcome, amounts(ev.Admitted), amounts(ev.Final))
			}))
		oaOpts = []option.RequestOption{option.WithBaseURL("http://" + oaURL + "/v1/"), option.WithAPIKey("sim")}
		anOpts = []aoption.RequestOption{aoption.WithBaseURL("http://" + anURL), aoption.WithAPIKey("sim")}
	}
	oc, ac, err := newClients(ctx, storeURL, limitsFile, topts...)
	if err != nil {
		return err
	}
	chat, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(100),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello in five words.")}}, oaOpts...)
	if err != nil {
		return fmt.Errorf("openai: %w", err)
	}
	fmt.Printf("openai: %d prompt + %d completion tokens\n", chat.Usage.PromptTokens, chat.Usage.CompletionTokens)
	stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello in five words."))}}, anOpts...)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return err
		}
	}
	if err := stream.Err(); err != nil {
		return fmt.Errorf("anthropic: %w", err)
	}
	stream.Close()
	fmt.Printf("anthropic: %d input + %d output tokens\n", msg.Usage.InputTokens, msg.Usage.OutputTokens)
	return nil
}

// serve starts a simulator of vendor v on a free loopback port and returns
// its host:port.
func serve(v vendorsim.Vendor) (string, error) {
	sim, err := vendorsim.New(vendorsim.Config{Vendor: v, OutputTokens: vendorsim.Uniform(5, 20)})
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = http.Serve(ln, sim) }() // serves until the program exits
	return ln.Addr().String(), nil
}

func amounts(cs []vendors.Charge) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Amount
	}
	return out
}
