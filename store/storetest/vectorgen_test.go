package storetest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors from the reference model")

// TestGenerateVectors regenerates the golden vectors from the scenarios and
// the reference model, and fails if the checked-in files differ. Run
//
//	go test ./store/storetest -run TestGenerateVectors -update
//
// to rewrite them.
func TestGenerateVectors(t *testing.T) {
	dir, err := VectorsDir()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range scenarios() {
		m := newModel(v.BaseMs)
		m.prefix = v.Name + "/"
		for j := range v.Steps {
			v.Steps[j].Expect = m.apply(v.Steps[j])
			// The vectors leave the settlement counter out: the
			// model-based test and the SettleQueue tests pin it.
			forgetCharged(&v.Steps[j].Expect, Expect{})
		}
		data := encodeVector(v)
		path := filepath.Join(dir, fmt.Sprintf("%03d-%s.json", i, v.Name))
		if *update {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(old, data) {
			t.Errorf("%s is missing or stale (%v); run go test ./store/storetest -run TestGenerateVectors -update", path, err)
		}
	}
}

// encodeVector writes a vector with one step per line, so that diffs of the
// checked-in files stay readable.
func encodeVector(v Vector) []byte {
	var b bytes.Buffer
	line := func(x any) []byte {
		data, err := json.Marshal(x)
		if err != nil {
			panic(err)
		}
		return data
	}
	fmt.Fprintf(&b, "{\n  \"name\": %s,\n  \"description\": %s,\n  \"base_ms\": %d,\n  \"steps\": [\n",
		line(v.Name), line(v.Description), v.BaseMs)
	for i, s := range v.Steps {
		b.WriteString("    ")
		b.Write(line(s))
		if i < len(v.Steps)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

// TestVectorsDecodeStrictly checks that the checked-in vectors use only
// known fields and are sorted by file name.
func TestVectorsDecodeStrictly(t *testing.T) {
	dir, err := VectorsDir()
	if err != nil {
		t.Fatal(err)
	}
	vs, err := LoadVectors(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(vs), len(scenarios()); got != want {
		t.Errorf("%d vectors in %s, want %d (one per scenario)", got, dir, want)
	}
}
