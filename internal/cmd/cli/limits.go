package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	limitsfile "github.com/ontopix/sluice/limits"
	"github.com/ontopix/sluice/store"
)

// limitsFlags are shared by apply, plan and diff.
type limitsFlags struct {
	file, output string
	reset, prune bool
	exitCode     bool
}

func newLimitsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Declare limits in a YAML file and apply them to the store",
		Long: `limits keeps the store's buckets in line with a YAML file that declares
dimensions (type, capacity, per, refill, cost_per_call, max_debt) and presets
built from the vendor profiles (openai, anthropic, azure, gemini, groq,
elevenlabs; headroom and burst tune them). See docs/examples/limits.yaml and
docs/vendors.md.

plan shows what apply would do, diff shows only the differences, apply does
it. apply never resets a live balance unless --reset; buckets in the store
that the file does not declare are left alone unless --prune. Each write of
apply is conditional on what it read (create only if still missing, change
only over the configuration read), so it may race with services applying the
same file at start-up: a bucket changed in between is read again, never
refilled nor overwritten unseen.`,
		Example: `  sluice limits plan -f limits.yaml
  sluice limits diff -f limits.yaml --exit-code   # exit 1 on drift
  sluice limits apply -f limits.yaml
  sluice limits apply -f limits.yaml --reset --prune`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(limitsSub(g, "plan", "Show what apply would change"),
		limitsSub(g, "diff", "Show how the store differs from the file"),
		limitsSub(g, "apply", "Create and reconfigure buckets as the file declares"))
	return cmd
}

func limitsSub(g *globals, name, short string) *cobra.Command {
	var f limitsFlags
	cmd := &cobra.Command{
		Use:     name + " -f FILE",
		Short:   short,
		Example: fmt.Sprintf("  sluice limits %s -f limits.yaml\n  sluice limits %s -f limits.yaml --output json", name, name),
		Args:    clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clikit.OutputFlag(f.output); err != nil {
				return err
			}
			if f.file == "" {
				return usagef("%s: name the limits file with -f FILE", cmd.CommandPath())
			}
			lf, err := limitsfile.Load(f.file)
			if err != nil {
				var pe *limitsfile.Error
				if errors.As(err, &pe) {
					// Every problem, each with file:line:column: field, on one line.
					return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
				}
				return err
			}
			return g.WithClient(cmd, name == "apply", func(c *sluice.Client) error {
				cur, err := c.Buckets(cmd.Context())
				if err != nil {
					return err
				}
				plan := limitsfile.Plan(lf, storeStates(cur), f.reset, f.prune)
				w := cmd.OutOrStdout()
				switch name {
				case "plan":
					for _, warn := range limitsfile.Unmetered(lf) {
						fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+warn)
					}
					return writePlan(w, f.output, plan)
				case "diff":
					if err := writeDiff(w, f.output, plan); err != nil {
						return err
					}
					if f.exitCode && changed(plan) {
						return fmt.Errorf("the store differs from %s", f.file)
					}
					return nil
				}
				return applyPlan(cmd, c, f, lf)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "limits file (YAML)")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	if name != "diff" {
		fl.BoolVar(&f.reset, "reset", false, "fill every declared bucket to capacity (default: keep live balances)")
		fl.BoolVar(&f.prune, "prune", false, "delete buckets the file does not declare")
	} else {
		fl.BoolVar(&f.exitCode, "exit-code", false, "exit 1 when the store differs from the file")
	}
	return cmd
}

func changed(plan []limitsfile.Change) bool {
	for _, c := range plan {
		if c.Action != limitsfile.Unchanged {
			return true
		}
	}
	return false
}

func fieldsString(fs []limitsfile.FieldChange) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		if f.From == "" {
			parts[i] = f.Field + "=" + f.To
		} else {
			parts[i] = f.Field + " " + f.From + " -> " + f.To
		}
	}
	return strings.Join(parts, ", ")
}

func writePlan(w io.Writer, output string, plan []limitsfile.Change) error {
	if output == "json" {
		return clikit.WriteJSON(w, map[string]any{"changes": nonNil(plan), "summary": limitsfile.Summary(plan)})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tDIMENSION\tSOURCE\tCHANGES")
	for _, c := range plan {
		src := c.Source
		if c.Line > 0 {
			src += fmt.Sprintf(" (line %d)", c.Line)
		}
		if src == "" {
			src = "-"
		}
		ch := fieldsString(c.Fields)
		switch {
		case c.Action == limitsfile.Unmanaged:
			ch = "not in the file; kept (--prune deletes it)"
		case c.Action == limitsfile.Delete:
			ch = "not in the file"
		case c.Action == limitsfile.Unchanged:
			ch = "-"
		}
		if c.Reset && c.Action != limitsfile.Create {
			ch = strings.TrimPrefix(ch+"; balance reset to capacity", "-; ")
		} else if c.Action == limitsfile.Update {
			ch += "; live balance kept"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Action, c.Dimension, src, ch)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nPlan: %s.\n", limitsfile.Summary(plan))
	return err
}

func writeDiff(w io.Writer, output string, plan []limitsfile.Change) error {
	var diffs []limitsfile.Change
	for _, c := range plan {
		if c.Action != limitsfile.Unchanged {
			diffs = append(diffs, c)
		}
	}
	if output == "json" {
		return clikit.WriteJSON(w, nonNil(diffs))
	}
	if len(diffs) == 0 {
		_, err := fmt.Fprintln(w, "no differences")
		return err
	}
	for _, c := range diffs {
		switch c.Action {
		case limitsfile.Create:
			fmt.Fprintf(w, "+ %s\n", c.Dimension)
			for _, f := range c.Fields {
				fmt.Fprintf(w, "+     %s: %s\n", f.Field, f.To)
			}
		case limitsfile.Unmanaged, limitsfile.Delete:
			fmt.Fprintf(w, "- %s (in the store, not in the file)\n", c.Dimension)
		default:
			fmt.Fprintf(w, "~ %s\n", c.Dimension)
			for _, f := range c.Fields {
				fmt.Fprintf(w, "-     %s: %s\n+     %s: %s\n", f.Field, f.From, f.Field, f.To)
			}
		}
	}
	return nil
}

// applyPlan applies the file as limits.Apply does (every write
// conditional on what was read, re-planning when another writer changed a
// bucket meanwhile) and prints the changes made.
func applyPlan(cmd *cobra.Command, cl *sluice.Client, f limitsFlags, lf *limitsfile.File) error {
	ctx, w := cmd.Context(), cmd.OutOrStdout()
	var opts []limitsfile.ApplyOption
	if f.reset {
		opts = append(opts, limitsfile.WithReset())
	}
	if f.prune {
		opts = append(opts, limitsfile.WithPrune())
	}
	done, err := limitsfile.Apply(ctx, cl, lf, opts...)
	if f.output == "table" {
		for _, c := range done {
			line := fmt.Sprintf("%s %s", c.Action, c.Dimension)
			if s := fieldsString(c.Fields); s != "" && c.Action != limitsfile.Create {
				line += ": " + s
			} else if c.Action == limitsfile.Create {
				line += ": " + clikit.LimitString(c.Bucket.Config)
			}
			fmt.Fprintln(w, line)
		}
	}
	if err != nil {
		return err
	}
	if f.output == "json" {
		return clikit.WriteJSON(w, map[string]any{"applied": nonNil(done), "summary": appliedSummary(done)})
	}
	if len(done) == 0 {
		fmt.Fprintln(w, "nothing to change")
	}
	_, err = fmt.Fprintf(w, "Applied: %s.\n", appliedSummary(done))
	return err
}

// appliedSummary counts the changes an apply made: after a re-plan (a
// bucket changed under it) they are not the first plan's.
func appliedSummary(done []limitsfile.Change) string {
	n := map[limitsfile.Action]int{}
	for _, c := range done {
		n[c.Action]++
	}
	return fmt.Sprintf("%d created, %d updated, %d reset, %d deleted",
		n[limitsfile.Create], n[limitsfile.Update], n[limitsfile.Reset], n[limitsfile.Delete])
}

func nonNil(cs []limitsfile.Change) []limitsfile.Change {
	if cs == nil {
		return []limitsfile.Change{}
	}
	return cs
}

// storeStates converts the Client's bucket states to the form the limits
// file planner compares against.
func storeStates(ss []sluice.BucketState) []store.BucketState {
	out := make([]store.BucketState, len(ss))
	for i, s := range ss {
		out[i] = store.BucketState{Bucket: s.Bucket, Tokens: int64(s.Tokens), LastRefill: s.LastRefill.UnixMilli(),
			ActiveLeases: s.ActiveLeases, NextExpiry: s.NextExpiry, Now: s.Now}
	}
	return out
}
