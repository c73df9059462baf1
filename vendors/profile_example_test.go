package vendors_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
)

// An OpenAI tier's published limits become buckets that never admit more
// than OpenAI would: the request bucket holds one second's worth, and
// every rate is 2 % below the vendor's.
func ExampleOpenAIProfile() {
	p, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 500, TPM: 30_000})
	if err != nil {
		panic(err)
	}
	for _, b := range p.Buckets() {
		fmt.Printf("%s: capacity %d, refill %d per %s\n", b.Name, b.Capacity, b.RefillAmount, b.RefillPeriod)
	}
	// Output:
	// openai#gpt-4o#rpm: capacity 7, refill 500 per 1m1.225s
	// openai#gpt-4o#tpm: capacity 29400, refill 30000 per 1m1.225s
}

// A profile's buckets go to a client like any other; its cost model says
// what to acquire for a call and what to settle once the response reports
// its usage.
func ExampleProfile_Admission() {
	ctx := context.Background()
	p, err := vendors.AnthropicProfile(vendors.AnthropicLimits{RPM: 50, InputTPM: 40_000, OutputTPM: 8_000})
	if err != nil {
		panic(err)
	}
	client, err := sluice.New(memstore.New())
	if err != nil {
		panic(err)
	}
	for _, b := range p.Buckets() {
		if err := client.PutBucket(ctx, b); err != nil {
			panic(err)
		}
	}

	// 2,000 uncached input tokens, max_tokens 4096, about 600 expected out.
	call := vendors.Call{InputTokens: 2_000, MaxOutputTokens: 4_096, OutputEstimate: 600}
	charges, err := p.Admission(call)
	if err != nil {
		panic(err)
	}
	var reqs []sluice.Request
	for _, c := range charges {
		fmt.Printf("acquire %s %d\n", c.Dimension, c.Amount)
		reqs = append(reqs, sluice.Request{Dimension: c.Dimension, Cost: c.Amount})
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // wait at most 10 s
	defer cancel()
	err = client.WithSlotMany(wctx, reqs, func(ctx context.Context, l *sluice.Lease) error {
		usage := vendors.Usage{Input: 1_900, CacheCreation: 150, CacheRead: 4_000, Output: 812} // from the response
		settle, err := p.Settle(charges, usage)
		if err != nil {
			return err
		}
		for _, s := range settle {
			fmt.Printf("settle %s to %d\n", s.Dimension, s.Amount)
			if _, err := l.Settle(ctx, s.Dimension, s.Amount); err != nil {
				return err
			}
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// acquire anthropic#rpm 1
	// acquire anthropic#input_tpm 2000
	// acquire anthropic#output_tpm 600
	// settle anthropic#input_tpm to 2050
	// settle anthropic#output_tpm to 812
	// <nil>
}

// A header parser reports a Metric; the profile names the dimension to
// cool down or sync.
func ExampleProfile_Dimension() {
	p, err := vendors.AzureProfile(vendors.AzureLimits{Deployment: "gpt-4o-eu", TPM: 30_000})
	if err != nil {
		panic(err)
	}
	for _, m := range []vendors.Metric{vendors.Tokens, vendors.Requests, vendors.OutputTokens} {
		name, ok := p.Dimension(m)
		fmt.Println(m, name, ok)
	}
	// Output:
	// tokens azure#gpt-4o-eu#tpm true
	// requests azure#gpt-4o-eu#rpm true
	// output_tokens  false
}

// Azure counts tokens per calendar minute and never refunds them: a
// settlement only charges more.
func ExampleAzureCost() {
	m := vendors.AzureCost()
	admitted, _ := m.Admission(vendors.Call{InputTokens: 500, MaxOutputTokens: 1_000, N: 2})
	settled, _ := m.Settle(admitted, vendors.Usage{Input: 480, Output: 300})
	fmt.Println(admitted)
	fmt.Println(settled)
	// Output:
	// [{requests  1} {tokens  2500}]
	// [{tokens  2500}]
}

// A plan and model family give ElevenLabs' published concurrency.
func ExampleElevenLabsProfile() {
	p, err := vendors.ElevenLabsProfile(vendors.ElevenLabsLimits{Plan: vendors.ElevenLabsCreator, Family: vendors.ElevenLabsFlashTurbo})
	if err != nil {
		panic(err)
	}
	b := p.Buckets()[0]
	fmt.Println(b.Name, b.Type, b.Capacity)
	// Output: elevenlabs#flash_turbo#concurrent concurrent 10
}

// WithBurst and WithHeadroom tune a profile; a burst the vendor would not
// allow is refused with the field and value.
func ExampleWithBurst() {
	_, err := vendors.OpenAIProfile(vendors.OpenAILimits{RPM: 500}, vendors.WithBurst(vendors.Requests, 50))
	fmt.Println(err)
	p, _ := vendors.OpenAIProfile(vendors.OpenAILimits{RPM: 500}, vendors.WithBurst(vendors.Requests, 4), vendors.WithHeadroom(0.05))
	fmt.Println(p.Buckets()[0].Capacity, p.Buckets()[0].RefillPeriod)
	// Output:
	// vendors: openai profile: sluice: invalid burst[rpm] "50": must be between 1 and 8, the vendor's own burst for 500 per minute
	// 4 1m3.158s
}
