package console

import (
	"compress/gzip"
	"io"
	"io/fs"
	"testing"
)

// maxAssetsGzip is the budget of everything the console embeds (scripts,
// styles and templates), each file gzipped.
const maxAssetsGzip = 150 << 10

// TestAssetBudget keeps the embedded files within the budget.
func TestAssetBudget(t *testing.T) {
	var raw, zipped int64
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		var n countWriter
		zw, _ := gzip.NewWriterLevel(&n, gzip.BestCompression)
		if _, err := zw.Write(b); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		raw += int64(len(b))
		zipped += int64(n)
		t.Logf("%-40s %7d bytes, %6d gzipped", path, len(b), n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("total %d bytes, %d gzipped (budget %d)", raw, zipped, maxAssetsGzip)
	if zipped > maxAssetsGzip {
		t.Errorf("the embedded assets are %d bytes gzipped, over the %d-byte budget", zipped, maxAssetsGzip)
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
