package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/jsonout"
)

// bucketView is a bucket's configuration and state as status, bucket list
// and bucket get print it.
type bucketView struct {
	Dimension    string `json:"dimension"`
	Type         string `json:"type"`
	Capacity     int64  `json:"capacity"`
	RefillAmount int64  `json:"refill_amount"`
	// RefillPeriod is 0s for a concurrent bucket.
	RefillPeriod jsonout.Duration `json:"refill_period"`
	CostPerCall  int64            `json:"cost_per_call"`
	MaxDebt      int64            `json:"max_debt"`
	// Tokens is the balance now (negative: debt).
	Tokens      float64 `json:"tokens"`
	TokensMilli int64   `json:"tokens_milli"`
	FillPct     float64 `json:"fill_pct"`
	// ActiveLeases counts lease records, expired or not.
	ActiveLeases int        `json:"active_leases"`
	NextExpiry   *time.Time `json:"next_expiry,omitempty"`
	// CooldownUntil is the end of a cooldown running at At; absent when
	// none is.
	CooldownUntil *time.Time `json:"cooldown_until,omitempty"`
	// Waiters counts the callers in line for a concurrent bucket's slots;
	// absent when none are.
	Waiters int `json:"waiters,omitempty"`
	// ReservedUntil is when a rate bucket's last reservation becomes
	// valid, while callers wait in line; absent otherwise.
	ReservedUntil *time.Time `json:"reserved_until,omitempty"`
	// TimeToFull is how long until the bucket is full if nothing else
	// takes from it; null for a concurrent bucket waiting on releases.
	TimeToFull *jsonout.Duration `json:"time_to_full"`
	At         time.Time         `json:"at"`
}

func viewOf(s sluice.BucketState) bucketView {
	v := bucketView{
		Dimension: s.Name, Type: s.Type.String(), Capacity: s.Capacity, RefillAmount: s.RefillAmount,
		RefillPeriod: jsonout.Duration(s.RefillPeriod), CostPerCall: s.Config.Cost(), MaxDebt: s.Config.Debt(),
		Tokens: s.Tokens.Tokens(), TokensMilli: int64(s.Tokens), ActiveLeases: s.ActiveLeases, At: s.Now.UTC(),
	}
	if s.Capacity > 0 {
		v.FillPct = math.Round(float64(s.Tokens)/float64(s.Capacity)) / 10
	}
	if !s.NextExpiry.IsZero() {
		t := s.NextExpiry.UTC()
		v.NextExpiry = &t
	}
	if s.CoolingDown() {
		t := s.CooldownUntil.UTC()
		v.CooldownUntil = &t
	}
	v.Waiters = s.Waiters
	if s.ReservedUntil.After(s.Now) {
		t := s.ReservedUntil.UTC()
		v.ReservedUntil = &t
	}
	if d := sluice.TimeUntil(s, s.Capacity); d >= 0 && (s.Type != bucket.Concurrent || d == 0) {
		ttf := jsonout.Duration(d.Truncate(time.Millisecond))
		v.TimeToFull = &ttf
	}
	return v
}

// queue describes the line: callers waiting for slots, or how long until
// the reservations are all valid; "-" when there is none.
func (v bucketView) queue() string {
	switch {
	case v.Waiters > 0:
		return clikit.Itoa(int64(v.Waiters)) + " waiting"
	case v.ReservedUntil != nil:
		return clikit.Dur(v.ReservedUntil.Sub(v.At))
	}
	return "-"
}

func (v bucketView) timeToFull() string {
	switch {
	case v.TimeToFull == nil:
		return "on release"
	case *v.TimeToFull == 0:
		return "full"
	}
	return clikit.Dur(v.TimeToFull.D())
}

func newStatusCmd(g *globals) *cobra.Command {
	var (
		output   string
		watch    bool
		interval time.Duration
		count    int
	)
	cmd := &cobra.Command{
		Use:   "status [DIMENSION...]",
		Short: "Show every bucket's balance, fill, active leases and time to full",
		Long: `status prints one row per bucket (or per DIMENSION named): its type, limit,
capacity, the tokens available now (negative while in debt), how full it is,
the lease records it has and how long until it is full again if nobody takes
from it. A concurrent bucket below capacity fills only when leases are
released or reclaimed ("on release").

--watch refreshes the table every --interval until interrupted.`,
		Example: `  sluice status
  sluice status openai#rpm openai#tpm --output json
  sluice status --watch --interval 1s`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			if interval < 100*time.Millisecond {
				return usagef("--interval %s: must be at least 100ms", interval)
			}
			return g.WithClient(cmd, false, func(c *sluice.Client) error {
				w := cmd.OutOrStdout()
				if !watch {
					return printStatus(cmd.Context(), c, args, output, w)
				}
				return watchStatus(cmd.Context(), g, c, args, output, w, interval, count)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "table", "output format: table or json")
	f.BoolVarP(&watch, "watch", "w", false, "refresh until interrupted")
	f.DurationVar(&interval, "interval", 2*time.Second, "refresh interval with --watch")
	f.IntVar(&count, "count", 0, "with --watch, stop after this many refreshes (0: until interrupted)")
	return cmd
}

func readStates(ctx context.Context, c *sluice.Client, dims []string) ([]sluice.BucketState, error) {
	if len(dims) > 0 {
		return c.Peek(ctx, dims...)
	}
	return c.Buckets(ctx)
}

func readViews(ctx context.Context, c *sluice.Client, dims []string) ([]bucketView, error) {
	states, err := readStates(ctx, c, dims)
	if err != nil {
		return nil, err
	}
	views := make([]bucketView, len(states))
	for i, s := range states {
		views[i] = viewOf(s)
	}
	return views, nil
}

func printStatus(ctx context.Context, c *sluice.Client, dims []string, output string, w io.Writer) error {
	views, err := readViews(ctx, c, dims)
	if err != nil {
		return err
	}
	if output == "json" {
		return clikit.WriteJSON(w, views)
	}
	return statusTable(w, views)
}

// statusLine is one refresh of status --watch --output json: one compact
// JSON object per line (NDJSON).
type statusLine struct {
	At      time.Time    `json:"at"`
	Buckets []bucketView `json:"buckets"`
}

func statusTable(w io.Writer, views []bucketView) error {
	if len(views) == 0 {
		_, err := fmt.Fprintln(w, "no buckets (create them with 'sluice limits apply -f limits.yaml' or 'sluice bucket put')")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cooling := anyCooling(views)
	fmt.Fprint(tw, "DIMENSION\tTYPE\tLIMIT\tCAPACITY\tTOKENS\tFILL\tACTIVE LEASES\tTIME TO FULL")
	if cooling {
		fmt.Fprint(tw, "\tCOOLDOWN UNTIL")
	}
	fmt.Fprintln(tw)
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%.1f%%\t%d\t%s", v.Dimension, v.Type, rateOf(v), v.Capacity,
			clikit.Milli(v.TokensMilli), v.FillPct, v.ActiveLeases, v.timeToFull())
		if cooling {
			fmt.Fprint(tw, "\t"+v.cooldownUntil())
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// anyCooling reports whether a bucket among views is in a cooldown: only
// then does status show the COOLDOWN UNTIL column.
func anyCooling(views []bucketView) bool {
	for _, v := range views {
		if v.CooldownUntil != nil {
			return true
		}
	}
	return false
}

// cooldownUntil is the end of a running cooldown, or "-".
func (v bucketView) cooldownUntil() string {
	if v.CooldownUntil == nil {
		return "-"
	}
	return v.CooldownUntil.Format(time.RFC3339Nano)
}

func rateOf(v bucketView) string {
	t, _ := bucket.ParseType(v.Type)
	return clikit.RateString(bucket.Config{Type: t, Capacity: v.Capacity, RefillAmount: v.RefillAmount, RefillPeriod: v.RefillPeriod.D()})
}

func watchStatus(ctx context.Context, g *globals, c *sluice.Client, dims []string, output string, w io.Writer, every time.Duration, count int) error {
	tty := clikit.IsTerminal(w) && output == "table"
	enc := json.NewEncoder(w)
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 1; ; n++ {
		var err error
		if output == "json" {
			err = watchLine(ctx, g, c, dims, enc)
		} else {
			err = watchTable(ctx, g, c, dims, w, every, tty)
		}
		if err != nil {
			return err
		}
		if count > 0 && n >= count {
			return nil
		}
		if output == "table" && !tty {
			fmt.Fprintln(w)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// watchLine writes one refresh as one line of JSON.
func watchLine(ctx context.Context, g *globals, c *sluice.Client, dims []string, enc *json.Encoder) error {
	views, err := readViews(ctx, c, dims)
	if err != nil {
		return err
	}
	if views == nil {
		views = []bucketView{}
	}
	return enc.Encode(statusLine{At: g.Now().UTC(), Buckets: views})
}

// watchTable writes one refresh as a table, clearing a terminal first.
func watchTable(ctx context.Context, g *globals, c *sluice.Client, dims []string, w io.Writer, every time.Duration, tty bool) error {
	if tty {
		fmt.Fprint(w, "\x1b[H\x1b[2J")
	}
	fmt.Fprintf(w, "Every %s: sluice status  %s\n\n", every, g.Now().UTC().Format(time.RFC3339))
	return printStatus(ctx, c, dims, "table", w)
}
