package clikit

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"
)

// WriteJSON prints v indented.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// IsTerminal reports whether w is a character device.
func IsTerminal(w io.Writer) bool {
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return true
		}
	}
	return false
}

// Milli formats millitokens as tokens, with decimals only when needed.
func Milli(m int64) string {
	if m%1000 == 0 {
		return Itoa(m / 1000)
	}
	s := strings.TrimRight(strings.TrimRight(FormatFloat(float64(m)/1000, 3), "0"), ".")
	return s
}

// Dur formats a duration for tables: rounded to the millisecond.
func Dur(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d >= time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
