package vendors

import (
	"fmt"
	"strings"
)

// ElevenLabsPlan is an ElevenLabs subscription plan.
type ElevenLabsPlan string

// The plans with published concurrency limits.
const (
	ElevenLabsFree     ElevenLabsPlan = "free"
	ElevenLabsStarter  ElevenLabsPlan = "starter"
	ElevenLabsCreator  ElevenLabsPlan = "creator"
	ElevenLabsPro      ElevenLabsPlan = "pro"
	ElevenLabsScale    ElevenLabsPlan = "scale"
	ElevenLabsBusiness ElevenLabsPlan = "business"
)

// ElevenLabsFamily is a model family with its own concurrency limit.
type ElevenLabsFamily string

// The model families with published concurrency limits.
const (
	// ElevenLabsMultilingualV2 is Multilingual v2 text to speech.
	ElevenLabsMultilingualV2 ElevenLabsFamily = "multilingual_v2"
	// ElevenLabsFlashTurbo is the Flash and Turbo text-to-speech models.
	ElevenLabsFlashTurbo ElevenLabsFamily = "flash_turbo"
	// ElevenLabsSTT is speech to text.
	ElevenLabsSTT ElevenLabsFamily = "stt"
)

// ElevenLabsPlans lists the plans in the order of the vendor's table.
func ElevenLabsPlans() []ElevenLabsPlan {
	return []ElevenLabsPlan{ElevenLabsFree, ElevenLabsStarter, ElevenLabsCreator, ElevenLabsPro, ElevenLabsScale, ElevenLabsBusiness}
}

// ElevenLabsFamilies lists the model families in the order of the
// vendor's table.
func ElevenLabsFamilies() []ElevenLabsFamily {
	return []ElevenLabsFamily{ElevenLabsMultilingualV2, ElevenLabsFlashTurbo, ElevenLabsSTT}
}

// ElevenLabsConcurrency returns the concurrent requests a plan allows for
// a model family, and false when either is unknown.
func ElevenLabsConcurrency(p ElevenLabsPlan, f ElevenLabsFamily) (int64, bool) {
	row, ok := map[ElevenLabsPlan][3]int64{
		ElevenLabsFree:     {2, 4, 10},
		ElevenLabsStarter:  {3, 6, 15},
		ElevenLabsCreator:  {5, 10, 25},
		ElevenLabsPro:      {10, 20, 50},
		ElevenLabsScale:    {15, 30, 75},
		ElevenLabsBusiness: {15, 30, 75},
	}[p]
	if !ok {
		return 0, false
	}
	for i, g := range ElevenLabsFamilies() {
		if g == f {
			return row[i], true
		}
	}
	return 0, false
}

// ElevenLabsLimits are an ElevenLabs account's concurrency limit: either a
// plan and a model family, whose limit comes from the vendor's table, or
// an explicit number of concurrent requests.
type ElevenLabsLimits struct {
	// Plan is the subscription plan; empty when Concurrent is given.
	Plan ElevenLabsPlan
	// Family is the model family. Required with Plan; with Concurrent it
	// only scopes the dimension (elevenlabs#flash_turbo#concurrent).
	Family ElevenLabsFamily
	// Concurrent is the number of concurrent requests, when not from a
	// plan.
	Concurrent int64
}

// ElevenLabsProfile returns the profile for an ElevenLabs concurrency
// limit. ElevenLabs limits requests in flight per plan and model family
// and publishes no per-minute limit, so the profile has one concurrent
// dimension, <prefix>#concurrent, whose slots are the limit (headroom does
// not apply to a count of requests in flight).
func ElevenLabsProfile(l ElevenLabsLimits, opts ...ProfileOption) (Profile, error) {
	b := newBuilder(ElevenLabs, "family", string(l.Family), ElevenLabsCost(), opts)
	if b.err == nil && l.Family != "" {
		if _, ok := ElevenLabsConcurrency(ElevenLabsFree, l.Family); !ok {
			b.fail("family", l.Family, "unknown model family (want "+joinNames(ElevenLabsFamilies())+")")
		}
	}
	n := l.Concurrent
	switch {
	case b.err != nil:
	case l.Plan != "" && l.Concurrent != 0:
		b.fail("concurrent", l.Concurrent, fmt.Sprintf("give either a plan (%s) or a number of concurrent requests, not both", l.Plan))
	case l.Plan != "":
		if _, ok := ElevenLabsConcurrency(l.Plan, ElevenLabsMultilingualV2); !ok {
			b.fail("plan", l.Plan, "unknown plan (want "+joinNames(ElevenLabsPlans())+")")
		} else if l.Family == "" {
			b.fail("family", l.Family, "required with a plan (want "+joinNames(ElevenLabsFamilies())+")")
		} else {
			n, _ = ElevenLabsConcurrency(l.Plan, l.Family)
		}
	}
	b.slots(n)
	return b.done("plan, concurrent")
}

// ElevenLabsCost returns ElevenLabs' cost model: a request holds one
// concurrency slot while in flight, released when it completes.
func ElevenLabsCost() CostModel {
	return CostModel{Vendor: ElevenLabs, Metrics: []MetricCost{{Concurrent, AdmitOne, SettleNever, AdjustedToUsage}}}
}

func joinNames[T ~string](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}
