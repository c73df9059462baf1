package prometheus_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	alertsFile     = "../../deploy/prometheus/alerts.yml"
	dashboardFile  = "../../deploy/grafana/sluice.json"
	alertTestsFile = "testdata/alerts_test.yml"
	queriesFile    = "testdata/queries.yml"
)

// TestCheckerCatches shows that the PromQL checker rejects each kind of
// mistake it is meant to catch, and accepts the forms the files use.
func TestCheckerCatches(t *testing.T) {
	s := adapterSchema(t)
	tests := []struct {
		expr string
		bad  string // a part of the error wanted; "" for none
	}{
		{`sum by (dimension) (rate(sluice_acquire_total{outcome="retry_in"}[5m]))`, ""},
		{`histogram_quantile(0.95, sum by (dimension, le) (rate(sluice_dimension_wait_seconds_bucket{result="granted"}[5m]))) > 5`, ""},
		{`max by (dimension) (sluice_bucket_debt_tokens) / on (dimension) max by (dimension) (sluice_bucket_capacity_tokens) > 0.5`, ""},
		{`sum by (vendor, status) (rate(sluice_vendor_calls_total{status!="none",outcome=~"settled|partial"}[5m:1m])) * 60`, ""},
		{`sluice_state_up{instance="a"} == 0`, ""},
		{`sum(rate(sluice_acquire_totl[5m]))`, "sluice_acquire_totl is not"},
		{`sum(rate(sluice_acquire_total{outcom="granted"}[5m]))`, "no label outcom"},
		{`sum(rate(sluice_acquire_total{outcome="retryin"}[5m]))`, `"retryin" is not a value`},
		{`sum(rate(sluice_acquire_total{outcome=~"retry.*x"}[5m]))`, "matches no value"},
		{`sum by (dimensoin) (rate(sluice_acquire_total[5m]))`, "grouping by dimensoin"},
		{`sluice_acquire_total > 0`, "counter read outside rate"},
		{`rate(sluice_bucket_tokens[5m])`, "gauge read with rate"},
		{`sum(rate(sluice_acquire_total[5m])`, `want ")"`},
		{`sum(rate(sluice_acquire_total[5x]))`, "bad number"},
		{`rat(sluice_acquire_total[5m])`, "unknown function rat"},
		{`sluice_bucket_tokens{dimension="a" > 0`, "want"},
		{`sluice_bucket_tokens $dimension`, "unexpected character"},
		{`max by (dimension) (sluice_bucket_tokens) max`, "unexpected trailing input"},
	}
	for _, tt := range tests {
		_, errs := s.check(tt.expr)
		switch {
		case tt.bad == "" && len(errs) > 0:
			t.Errorf("%s: %v, want no error", tt.expr, errs)
		case tt.bad != "" && !strings.Contains(fmt.Sprint(errs), tt.bad):
			t.Errorf("%s: %v, want an error with %q", tt.expr, errs, tt.bad)
		}
	}
}

// ruleFile is a Prometheus rule file, as rulefmt reads it.
type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, path)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

var labelRef = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)

// TestAlertsFile checks deploy/prometheus/alerts.yml: a rule file whose
// every alert is named once, has a severity and a summary, an expression
// the checker accepts, and templates that name only labels the expression
// can carry.
func TestAlertsFile(t *testing.T) {
	s := adapterSchema(t)
	var f ruleFile
	readYAML(t, alertsFile, &f)
	if len(f.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	seen := map[string]bool{}
	n := 0
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: a group needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || r.Record != "" {
				t.Errorf("rule %q/%q: want an alert (and no record)", r.Alert, r.Record)
			}
			if seen[r.Alert] {
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			seen[r.Alert] = true
			if r.For != "" && !durationRE.MatchString(r.For) {
				t.Errorf("%s: for %q is not a duration", r.Alert, r.For)
			}
			if sev := r.Labels["severity"]; sev != "warning" && sev != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, sev)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", r.Alert)
			}
			labels, errs := s.check(r.Expr)
			for _, err := range errs {
				t.Errorf("%s: %v", r.Alert, err)
			}
			for k, v := range r.Annotations {
				for _, m := range labelRef.FindAllStringSubmatch(v, -1) {
					if labels != nil && !labels[m[1]] {
						t.Errorf("%s: annotation %s names $labels.%s, which the expression does not carry", r.Alert, k, m[1])
					}
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("%d alerts, want the full set (at least 10)", n)
	}
}

// TestAlertsTested checks that testdata/alerts_test.yml makes every alert
// fire in one case and stay quiet in another.
func TestAlertsTested(t *testing.T) {
	var rules ruleFile
	readYAML(t, alertsFile, &rules)
	var tests struct {
		RuleFiles          []string `yaml:"rule_files"`
		EvaluationInterval string   `yaml:"evaluation_interval"`
		Tests              []struct {
			Name         string           `yaml:"name"`
			Interval     string           `yaml:"interval"`
			InputSeries  []map[string]any `yaml:"input_series"`
			AlertRuleTst []struct {
				EvalTime  string           `yaml:"eval_time"`
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, alertTestsFile, &tests)
	if len(tests.RuleFiles) != 1 || filepath.Clean(filepath.Join("testdata", tests.RuleFiles[0])) != filepath.Clean(alertsFile) {
		t.Errorf("rule_files = %v, want the shipped %s", tests.RuleFiles, alertsFile)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTst {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] {
				t.Errorf("%s: no test makes it fire", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("%s: no test keeps it quiet", r.Alert)
			}
		}
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVars are the dashboard's variables, replaced by values PromQL
// accepts before an expression is checked.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "${dimension}", ".*", "$dimension", ".*")

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// dashboardExprs returns every PromQL expression of the dashboard, its
// variables replaced, by panel title.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal([]byte(readFile(t, dashboardFile)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs[fmt.Sprintf("%s (%s)", p.Title, tg.RefID)] = grafanaVars.Replace(tg.Expr)
		}
	}
	return exprs
}

// TestDashboard checks deploy/grafana/sluice.json: panel ids are unique,
// every query the checker accepts, and the dimension variable lists a
// label that exists.
func TestDashboard(t *testing.T) {
	s := adapterSchema(t)
	var d dashboard
	if err := json.Unmarshal([]byte(readFile(t, dashboardFile)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	ids := map[int]bool{}
	targets := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		targets += len(p.Targets)
	}
	exprs := dashboardExprs(t)
	if len(exprs) != targets || targets == 0 {
		t.Errorf("%d distinct panel queries of %d", len(exprs), targets)
	}
	for where, e := range exprs {
		if _, errs := s.check(e); len(errs) > 0 {
			t.Errorf("%s: %s: %v", where, e, errs)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		text, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, text)
			continue
		}
		if _, errs := s.check(m[1]); len(errs) > 0 {
			t.Errorf("variable %s: %v", v.Name, errs)
		}
		if mi := s[strings.TrimSpace(m[1])]; mi == nil || mi.labels[m[2]] == nil {
			t.Errorf("variable %s: %s has no label %s", v.Name, m[1], m[2])
		}
	}
}

// TestPromtool has promtool, Prometheus's own tool, check the shipped
// files: the alerts as a rule file, their unit tests and the documented
// queries' evaluated on made-up series, and every dashboard query parsed
// (written as recording rules into a temporary rule file).
func TestPromtool(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatalf("promtool checks the shipped alerts and dashboard: install it (apt-get install prometheus): %v", err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("promtool", args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", alertsFile)
	run("test", "rules", alertTestsFile, queriesFile)

	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	i := 0
	for _, e := range dashboardExprs(t) {
		i++
		fmt.Fprintf(&b, "      - record: dashboard_query_%d\n        expr: %q\n", i, e)
	}
	path := filepath.Join(t.TempDir(), "dashboard.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run("check", "rules", path)
}

// TestShippedFilesExist fails when a file the tests above read by its
// path relative to the package was moved or emptied.
func TestShippedFilesExist(t *testing.T) {
	for _, f := range []string{alertsFile, dashboardFile, alertTestsFile, queriesFile} {
		fi, err := os.Stat(f)
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
