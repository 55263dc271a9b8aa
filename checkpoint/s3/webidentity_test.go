package s3_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// roleARN is what IRSA puts in AWS_ROLE_ARN. MinIO, whose policies come from
// the token's claim, ignores a RoleArn it has no role for.
const roleARN = "arn:aws:iam::123456789012:role/lockstep-engine"

// useWebIdentity sets the environment as IRSA or Workload Identity sets it
// in a pod, pointed at srv for both S3 and STS, with token in the token
// file and no static keys. minio-go's IAM provider reads these variables
// from the process environment itself, hence t.Setenv.
func useWebIdentity(t *testing.T, srv *testenv.S3Server, token string) (tokenFile string) {
	t.Helper()
	dir := t.TempDir()
	tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		s3.EnvAccessKey:    "",
		s3.EnvSecretKey:    "",
		s3.EnvSessionToken: "",
		// Not the machine's ~/.aws/credentials, which the chain tries first.
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "no-such-file"),
		s3.EnvWebIdentityTokenFile:    tokenFile,
		s3.EnvRoleARN:                 roleARN,
		s3.EnvSTSEndpoint:             srv.URL,
		s3.EnvEndpoint:                srv.URL,
		s3.EnvRegion:                  srv.Region,
	} {
		t.Setenv(k, v)
	}
	return tokenFile
}

// A store opened with web identity alone, no static keys, gets temporary
// credentials from a real STS (MinIO's AssumeRoleWithWebIdentity) and passes
// the conformance suite with them.
func TestWebIdentity(t *testing.T) {
	srv, idp := testenv.MinIOWithOIDC(t)
	useWebIdentity(t, srv, idp.Token(t, nil))
	n := 0
	storetest.Run(t, func(t *testing.T) checkpoint.Store {
		n++
		s, err := s3.Open(t.Context(), srv.Bucket, fmt.Sprintf("webidentity/%d", n))
		if err != nil {
			t.Fatalf("Open with web identity error = %v", err)
		}
		return s
	})
}

// The credentials are the token's: with MinIO's readonly policy in the
// token's claim, a store reads what another wrote but may not write.
// (readonly does not grant listing, so the store is made with New, which
// sends no request, rather than Open.)
func TestWebIdentityPolicyFromToken(t *testing.T) {
	srv, idp := testenv.MinIOWithOIDC(t)
	if _, err := srv.Client(t).PutObject(t.Context(), srv.Bucket, "q/metadata", strings.NewReader("v1"), 2, minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put q/metadata with the root keys: %v", err)
	}
	useWebIdentity(t, srv, idp.Token(t, map[string]any{testenv.OIDCPolicyClaim: "readonly"}))
	s, err := s3.New(srv.Bucket, "q")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(t.Context(), "metadata"); err != nil || string(got) != "v1" {
		t.Errorf("Get(metadata) with a readonly token = %q, %v; want v1", got, err)
	}
	err = s.Create(t.Context(), "offsets/0", []byte("{}"))
	if !errors.Is(err, s3.ErrAccessDenied) {
		t.Fatalf("Create with a readonly token error = %v, want ErrAccessDenied", err)
	}
	if !strings.Contains(err.Error(), "web identity") {
		t.Errorf("error %q does not say the credentials came from web identity", err)
	}
}

// A token STS rejects, or an STS that does not answer, fails Open at once
// with ErrCredentials and the reason, naming the token file and the STS
// server, not with the bare "access denied" the server gives the unsigned
// request that minio-go sends when the chain found no credentials.
func TestWebIdentityRejected(t *testing.T) {
	srv, idp := testenv.MinIOWithOIDC(t)
	closed := "http://" + testenv.ClosedAddr(t)
	for _, tt := range []struct {
		name    string
		claims  map[string]any
		sts     string // "": srv
		reason  string // in the error
		retried bool   // an STS that does not answer may come back
	}{
		// MinIO looks for the client ID in "azp" when "aud" lacks it, and
		// names only "azp".
		{"wrong audience", map[string]any{"aud": "someone-else"}, "", "`azp` must match configured OpenID Client ID", false},
		{"expired", map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}, "", "Token is expired", false},
		{"no policy claim", map[string]any{testenv.OIDCPolicyClaim: nil}, "", "policy claim missing", false},
		{"STS unreachable", nil, closed, "connection refused", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tokenFile := useWebIdentity(t, srv, idp.Token(t, tt.claims))
			sts := srv.URL
			if tt.sts != "" {
				sts = tt.sts
				t.Setenv(s3.EnvSTSEndpoint, sts)
			}
			var st s3.Stats
			_, err := s3.Open(t.Context(), srv.Bucket, "q", s3.WithStats(&st), s3.WithOperationTimeout(2*time.Second), s3.WithRetries(0, 10*time.Millisecond))
			if !errors.Is(err, s3.ErrCredentials) {
				t.Fatalf("Open error = %v, want ErrCredentials", err)
			}
			for _, want := range []string{"no credentials", tokenFile, "STS " + sts, tt.reason} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open error = %q, does not contain %q", err, want)
				}
			}
			if r := st.Snapshot().Retries; tt.retried != (len(r) != 0) {
				t.Errorf("Open retried %v; want retries %v (a refusal is final, an STS that does not answer is retried until the operation timeout)", r, tt.retried)
			}
		})
	}
}
