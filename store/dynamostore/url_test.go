package dynamostore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice/store/dynamostore"
	"github.com/ontopix/sluice/store/storeurl"
)

// openers opens dynamodb:// URLs only.
func openers() storeurl.Openers { return storeurl.Openers{dynamostore.URLOpener()} }

// TestOpenAdminHandles: a dynamodb:// store exposes its client and table,
// which storeurl.Options.Table overrides.
func TestOpenAdminHandles(t *testing.T) {
	ctx := context.Background()
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"SLUICE_TABLE_NAME": "from-env", "SLUICE_AWS_REGION": "eu-west-1"}[k]
		return v, ok
	}
	for _, c := range []struct{ url, table, want string }{
		{"dynamodb://from-url?region=eu-west-1", "", "from-url"},
		{"dynamodb://from-url?region=eu-west-1", "from-arg", "from-arg"},
		{"dynamodb://", "", "from-env"},
		{"dynamodb://", "from-arg", "from-arg"},
	} {
		op, err := openers().OpenDetailed(ctx, c.url, storeurl.Options{LookupEnv: env, Table: c.table})
		if err != nil {
			t.Fatalf("%q: %v", c.url, err)
		}
		if db, ok := op.Admin.(*dynamodb.Client); !ok || op.Table != c.want || db.Options().Region != "eu-west-1" {
			t.Errorf("%q table %q: got table %q", c.url, c.table, op.Table)
		}
		op.Close()
	}
}

// TestOpenDynamoNoRegion: without a region anywhere, the URL is refused up
// front instead of every request failing.
func TestOpenDynamoNoRegion(t *testing.T) {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	_, err := openers().OpenDetailed(context.Background(), "dynamodb://tbl1", storeurl.Options{})
	if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "no AWS region") {
		t.Errorf("got %v", err)
	}
}
