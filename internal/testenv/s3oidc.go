package testenv

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// OIDC is an OpenID Connect identity provider served by the test on
// loopback: a discovery document and the JWKS of an RSA key made for it,
// which signs the tokens [OIDC.Token] returns. It stands in for what issues
// a pod's projected service-account token under IRSA or Workload Identity.
type OIDC struct {
	URL      string // the issuer; its discovery document is at URL + "/.well-known/openid-configuration"
	ClientID string // the audience the relying party (MinIO) expects

	key *rsa.PrivateKey
	kid string
}

// The claims an OIDC token and a MinIO trusting it agree on.
const (
	// OIDCClientID is the client ID [MinIOWithOIDC] configures: a token's
	// "aud" must contain it.
	OIDCClientID = "lockstep-test"
	// OIDCPolicyClaim names the claim that carries the MinIO policies of
	// the credentials MinIO issues (MINIO_IDENTITY_OPENID_CLAIM_NAME).
	OIDCPolicyClaim = "policy"
)

// StartOIDC serves an identity provider for clientID until the test ends.
func StartOIDC(t testing.TB, clientID string) *OIDC {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate the OIDC provider's key: %v", err)
	}
	o := &OIDC{ClientID: clientID, key: key, kid: "lockstep-test-1"}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	discovery := map[string]any{
		"issuer":                                o.URL,
		"jwks_uri":                              o.URL + "/jwks",
		"authorization_endpoint":                o.URL + "/authorize",
		"token_endpoint":                        o.URL + "/token",
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"claims_supported":                      []string{"iss", "sub", "aud", "exp", "iat", OIDCPolicyClaim},
	}
	jwks := map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": o.kid,
		"n": b64(key.N.Bytes()),
		"e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}}
	mux.HandleFunc("GET /.well-known/openid-configuration", serveJSON(discovery))
	mux.HandleFunc("GET /jwks", serveJSON(jwks))
	return o
}

// ConfigURL is the provider's discovery document, the form
// MINIO_IDENTITY_OPENID_CONFIG_URL takes.
func (o *OIDC) ConfigURL() string { return o.URL + "/.well-known/openid-configuration" }

// Token returns an RS256 JWT signed by the provider: issuer o.URL, audience
// o.ClientID, subject "system:serviceaccount:lockstep:engine", MinIO policy
// "readwrite", issued now and valid for an hour. Entries of claims replace
// those defaults or add to them; a nil value removes the claim.
func (o *OIDC) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	now := time.Now()
	all := map[string]any{
		"iss":           o.URL,
		"aud":           o.ClientID,
		"sub":           "system:serviceaccount:lockstep:engine",
		"iat":           now.Unix(),
		"exp":           now.Add(time.Hour).Unix(),
		OIDCPolicyClaim: "readwrite",
	}
	for k, v := range claims {
		if v == nil {
			delete(all, k)
		} else {
			all[k] = v
		}
	}
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": o.kid})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(all)
	if err != nil {
		t.Fatalf("encode token claims %v: %v", all, err)
	}
	signed := b64(header) + "." + b64(payload)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, o.key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return signed + "." + b64(sig)
}

// MinIOWithOIDC starts a MinIO of its own for the test (not the shared
// one), trusting a new [OIDC] provider for client [OIDCClientID] with
// policies named by the token's [OIDCPolicyClaim] claim, and creates a
// bucket on it. Its URL is also its STS endpoint (AWS_ENDPOINT_URL_STS):
// AssumeRoleWithWebIdentity with a token of the provider returns temporary
// credentials with the token's policies. MinIO ignores the RoleArn of such a
// request when it knows no role by that ARN, so any ARN (or none) will do.
// The S3Server's keys are MinIO's root user, for set-up and checks. MinIO
// stops when the test ends.
func MinIOWithOIDC(t testing.TB) (*S3Server, *OIDC) {
	t.Helper()
	const access, secret, region = "lockstep-root", "lockstep-root-secret", "us-east-1"
	bin := Tool(t, "minio")
	// MinIO reads the discovery document and the JWKS while it starts:
	// the provider must answer first.
	idp := StartOIDC(t, OIDCClientID)
	dir := t.TempDir()
	addr, console := loopbackAddr(t), loopbackAddr(t)
	env := []string{
		"MINIO_ROOT_USER=" + access, "MINIO_ROOT_PASSWORD=" + secret,
		"MINIO_BROWSER=off", "MINIO_REGION=" + region,
		"MINIO_IDENTITY_OPENID_CONFIG_URL=" + idp.ConfigURL(),
		"MINIO_IDENTITY_OPENID_CLIENT_ID=" + idp.ClientID,
		"MINIO_IDENTITY_OPENID_CLAIM_NAME=" + OIDCPolicyClaim,
	}
	args := []string{"server", "--quiet", "--address", addr, "--console-address", console, filepath.Join(dir, "data")}
	p, err := startProcess("minio-oidc", bin, args, env, filepath.Join(dir, "minio.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	srv := &S3Server{
		Kind: "minio", Endpoint: addr, URL: "http://" + addr,
		AccessKey: access, SecretKey: secret, Region: region,
		Bucket: bucketName(t.Name(), 0),
	}
	// The S3 API answers before MinIO's IAM (and so its STS) has loaded;
	// wait until STS issues credentials for a valid token.
	if err := p.waitReady(stsReady(srv.URL, idp.Token(t, nil))); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client(t).MakeBucket(context.Background(), srv.Bucket, minio.MakeBucketOptions{Region: region}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", srv.Bucket, srv.URL, err)
	}
	return srv, idp
}

// stsReady answers when an AssumeRoleWithWebIdentity with token succeeds.
func stsReady(endpoint, token string) func(context.Context) error {
	form := url.Values{
		"Action":           {"AssumeRoleWithWebIdentity"},
		"Version":          {"2011-06-15"},
		"WebIdentityToken": {token},
	}.Encode()
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			return fmt.Errorf("AssumeRoleWithWebIdentity at %s: %s: %s", endpoint, resp.Status, body)
		}
		return nil
	}
}

// loopbackAddr returns a free host:port on 127.0.0.1.
func loopbackAddr(t testing.TB) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
}

func serveJSON(v any) http.HandlerFunc {
	body, err := json.Marshal(v)
	return func(w http.ResponseWriter, _ *http.Request) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
