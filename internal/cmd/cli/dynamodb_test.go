package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// TestDynamoDBCreateTable creates tables named by the argument, the URL and
// SLUICE_TABLE_NAME, and checks what an existing table gives.
func TestDynamoDBCreateTable(t *testing.T) {
	srv := ddbServer(t)
	base := "dynamodb://?region=us-east-1&endpoint=" + srv.Endpoint
	e := &testEnv{t: t, url: base}

	// TABLE argument; before it exists, other commands say to create it.
	name := srv.TableName("cli-create")
	dropDDBTable(t, name)
	if _, errs, code := e.run("status", "--store", ddbURL(t, name)); code != clikit.ExitError ||
		!strings.Contains(errs, "the DynamoDB table does not exist: create it with 'sluice dynamodb create-table'") {
		t.Errorf("status on a missing table: exit %d %s", code, errs)
	}
	want := "created table " + name + " (region us-east-1 at " + srv.Endpoint + "): ACTIVE, PAY_PER_REQUEST, partition key vendor_dimension, TTL on ttl ENABLED; usage history in " + name + "-usage\n"
	if out := e.ok("dynamodb", "create-table", name); out != want {
		t.Errorf("create-table:\n got %q\nwant %q", out, want)
	}
	out, errs, code := e.run("dynamodb", "create-table", name)
	if code != clikit.ExitError || out != "" || errs != "sluice: table "+name+" already exists (--if-not-exists accepts it)\n" {
		t.Errorf("existing table: exit %d %q %q", code, out, errs)
	}
	var v ddbTableView
	if err := json.Unmarshal([]byte(e.ok("dynamodb", "create-table", name, "--if-not-exists", "-o", "json")), &v); err != nil ||
		v != (ddbTableView{Table: name, Region: "us-east-1", Endpoint: srv.Endpoint, Status: "ACTIVE", BillingMode: "PAY_PER_REQUEST",
			PartitionKey: "vendor_dimension", TTLAttribute: "ttl", TTLStatus: "ENABLED", UsageTable: name + "-usage"}) {
		t.Errorf("--if-not-exists json: %v %+v", err, v)
	}

	// Table from the URL, then used by the other commands.
	name2 := srv.TableName("cli-create")
	dropDDBTable(t, name2)
	u := &testEnv{t: t, url: ddbURL(t, name2)}
	if out := u.ok("dynamodb", "create-table"); !strings.HasPrefix(out, "created table "+name2+" ") {
		t.Errorf("table from the URL:\n%s", out)
	}
	u.ok("bucket", "put", "openai#rpm", "--type", "requests", "--capacity", "3")
	if out := u.ok("acquire", "openai#rpm"); !strings.HasPrefix(out, "GRANTED ") {
		t.Errorf("acquire on the new table:\n%s", out)
	}

	// Table from SLUICE_TABLE_NAME.
	name3 := srv.TableName("cli-create")
	dropDDBTable(t, name3)
	env := &testEnv{t: t, url: "dynamodb://", env: map[string]string{
		"SLUICE_TABLE_NAME": name3, "SLUICE_AWS_REGION": "us-east-1", "SLUICE_ENDPOINT_URL": srv.Endpoint}}
	if out := env.ok("dynamodb", "create-table", "-o", "json"); !strings.Contains(out, `"table": "`+name3+`"`) || !strings.Contains(out, `"created": true`) {
		t.Errorf("table from SLUICE_TABLE_NAME:\n%s", out)
	}

	// A table with another key is never accepted.
	foreign := srv.TableName("cli-foreign")
	createDDBTable(t, foreign, "id")
	if _, errs, code := e.run("dynamodb", "create-table", foreign, "--if-not-exists"); code != clikit.ExitError ||
		!strings.Contains(errs, "not a Sluice table: its key is id (S), not vendor_dimension (S)") {
		t.Errorf("foreign table: exit %d %s", code, errs)
	}
	if _, errs, code := e.run("dynamodb", "create-table"); code != clikit.ExitUsage || !strings.Contains(errs, "name the table") {
		t.Errorf("no table: exit %d %s", code, errs)
	}
}

// TestDynamoDBNoCredentials: without AWS credentials, create-table and the
// store's operations are configuration errors (exit 2), never an outage
// (exit 3) that fail-open would turn into grants.
func TestDynamoDBNoCredentials(t *testing.T) {
	srv := ddbServer(t)
	dir := t.TempDir()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_SHARED_CREDENTIALS_FILE": dir + "/none", "AWS_CONFIG_FILE": dir + "/none", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_WEB_IDENTITY_TOKEN_FILE": ""} {
		t.Setenv(k, v)
	}
	e := &testEnv{t: t, url: ddbURL(t, srv.TableName("cli-nocreds"))}
	for _, args := range [][]string{{"dynamodb", "create-table"}, {"status"}} {
		_, errs, code := e.run(args...)
		if code != clikit.ExitUsage || !strings.Contains(errs, "credentials") {
			t.Errorf("%v without credentials: exit %d, %q; want exit %d naming the credentials", args, code, errs, clikit.ExitUsage)
		}
	}
}
