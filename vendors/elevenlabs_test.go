package vendors

import (
	"testing"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func TestElevenLabsProfile(t *testing.T) {
	runProfileCases(t, []profileCase{
		{"plan and family", func() (Profile, error) {
			return ElevenLabsProfile(ElevenLabsLimits{Plan: ElevenLabsCreator, Family: ElevenLabsFlashTurbo})
		}, []store.Bucket{{Name: "elevenlabs#flash_turbo#concurrent", Config: bucket.ConcurrentSlots(10)}}},
		{"a number, headroom ignored", func() (Profile, error) {
			return ElevenLabsProfile(ElevenLabsLimits{Concurrent: 5}, WithHeadroom(0.5))
		}, []store.Bucket{{Name: "elevenlabs#concurrent", Config: bucket.ConcurrentSlots(5)}}},
		{"fewer slots than the plan", func() (Profile, error) {
			return ElevenLabsProfile(ElevenLabsLimits{Plan: ElevenLabsFree, Family: ElevenLabsSTT}, WithBurst(Concurrent, 4))
		}, []store.Bucket{{Name: "elevenlabs#stt#concurrent", Config: bucket.ConcurrentSlots(4)}}},
	})
}

// TestElevenLabsTable checks the plan table as the vendor publishes it.
func TestElevenLabsTable(t *testing.T) {
	want := map[ElevenLabsPlan][3]int64{
		ElevenLabsFree: {2, 4, 10}, ElevenLabsStarter: {3, 6, 15}, ElevenLabsCreator: {5, 10, 25},
		ElevenLabsPro: {10, 20, 50}, ElevenLabsScale: {15, 30, 75}, ElevenLabsBusiness: {15, 30, 75},
	}
	for _, p := range ElevenLabsPlans() {
		for i, f := range ElevenLabsFamilies() {
			got, ok := ElevenLabsConcurrency(p, f)
			if !ok || got != want[p][i] {
				t.Errorf("%s %s: got %d, %v; want %d", p, f, got, ok, want[p][i])
			}
		}
	}
	if _, ok := ElevenLabsConcurrency("enterprise", ElevenLabsSTT); ok {
		t.Error("unknown plan found")
	}
	if _, ok := ElevenLabsConcurrency(ElevenLabsPro, "music"); ok {
		t.Error("unknown family found")
	}
}
