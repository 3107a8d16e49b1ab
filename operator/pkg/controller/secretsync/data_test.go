package secretsync

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

func secret(name string, version int64, kv ...string) apiwire.Secret {
	s := apiwire.Secret{SecretInfo: apiwire.SecretInfo{Name: name, Version: version}, Data: map[string][]byte{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Data[kv[i]] = []byte(kv[i+1])
	}
	return s
}

func TestBuild(t *testing.T) {
	db := secret("team-a/db", 3, "user", "app", "password", "s3cr3t")
	cache := secret("team-a/cache", 1, "redis-url", "redis://x")
	for _, tc := range []struct {
		name    string
		sources []apiwire.Secret
		target  tunav1.SecretSyncTarget
		want    map[string]string
		reason  string
		msg     string
	}{
		{name: "every key as it is", sources: []apiwire.Secret{db},
			want: map[string]string{"user": "app", "password": "s3cr3t"}},
		{name: "a prefix merges", sources: []apiwire.Secret{cache, db},
			want: map[string]string{"user": "app", "password": "s3cr3t", "redis-url": "redis://x"}},
		{name: "keys pick and rename", sources: []apiwire.Secret{db},
			target: tunav1.SecretSyncTarget{Keys: []tunav1.KeyMapping{{From: "password", To: "DB_PASSWORD"}, {From: "user"}}},
			want:   map[string]string{"DB_PASSWORD": "s3cr3t", "user": "app"}},
		{name: "template adds a key", sources: []apiwire.Secret{db},
			target: tunav1.SecretSyncTarget{Keys: []tunav1.KeyMapping{{From: "user"}},
				Template: map[string]string{"DSN": "postgres://{{ .user }}:{{ .password }}@db/app", "B64": "{{ .user | b64enc }}", "Q": `{{ index . "password" | upper | quote }}`}},
			want: map[string]string{"user": "app", "DSN": "postgres://app:s3cr3t@db/app", "B64": "YXBw", "Q": `"S3CR3T"`}},
		{name: "same key in two secrets", sources: []apiwire.Secret{secret("a/one", 1, "k", "1"), secret("a/two", 1, "k", "2")},
			reason: tunav1.ReasonKeyConflict, msg: `edge secrets a/one and a/two both have the key "k"`},
		{name: "mapped key missing", sources: []apiwire.Secret{db},
			target: tunav1.SecretSyncTarget{Keys: []tunav1.KeyMapping{{From: "token"}}},
			reason: tunav1.ReasonKeyNotFound, msg: `target.keys names the key "token", which the edge secret(s) team-a/db do not have (they have: password, user)`},
		{name: "template names a missing key", sources: []apiwire.Secret{db},
			target: tunav1.SecretSyncTarget{Template: map[string]string{"DSN": "{{ .host }}"}},
			reason: tunav1.ReasonTemplateFailed, msg: "target.template[DSN] failed"},
		{name: "template does not parse", sources: []apiwire.Secret{db},
			target: tunav1.SecretSyncTarget{Template: map[string]string{"DSN": "{{ .user "}},
			reason: tunav1.ReasonTemplateFailed, msg: "target.template[DSN] does not parse"},
		{name: "template cannot read files or env", sources: []apiwire.Secret{db},
			target: tunav1.SecretSyncTarget{Template: map[string]string{"X": `{{ env "HOME" }}`}},
			reason: tunav1.ReasonTemplateFailed, msg: `function "env" not defined`},
		{name: "template output bounded", sources: []apiwire.Secret{db},
			target: tunav1.SecretSyncTarget{Template: map[string]string{"X": `{{ printf "%2000000s" "x" }}`}},
			reason: tunav1.ReasonTemplateFailed, msg: "larger than"},
		{name: "template error quotes no value", sources: []apiwire.Secret{db},
			target: tunav1.SecretSyncTarget{Template: map[string]string{"X": `{{ range .password }}{{ end }}`}},
			reason: tunav1.ReasonTemplateFailed, msg: "withheld"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Build(tc.sources, tc.target)
			if tc.reason != "" {
				var be *BuildError
				if !errors.As(err, &be) || be.Reason != tc.reason || !strings.Contains(be.Message, tc.msg) {
					t.Fatalf("err = %v, want reason %s with %q", err, tc.reason, tc.msg)
				}
				if strings.Contains(be.Message, "s3cr3t") {
					t.Fatalf("the message, which status shows, quotes a secret value: %s", be.Message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotS := map[string]string{}
			for k, v := range got {
				gotS[k] = string(v)
			}
			if !maps.Equal(gotS, tc.want) {
				t.Fatalf("data = %v, want %v", gotS, tc.want)
			}
		})
	}
}

func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      Policy
		source tunav1.SecretSyncSource
		ok     bool
		msg    string
	}{
		{"own namespace", DefaultPolicy, tunav1.SecretSyncSource{Name: "team-a/db"}, true, ""},
		{"own prefix", DefaultPolicy, tunav1.SecretSyncSource{Prefix: "team-a/app-"}, true, ""},
		{"another namespace", DefaultPolicy, tunav1.SecretSyncSource{Name: "team-b/db"}, false, `namespace team-a may only sync edge secrets named team-a/... (chart: secretSync.prefix), and source.name is "team-b/db"`},
		{"a name that only starts like it", DefaultPolicy, tunav1.SecretSyncSource{Name: "team-ab/db"}, false, "may only sync edge secrets named team-a/"},
		{"a prefix wider than the namespace", DefaultPolicy, tunav1.SecretSyncSource{Prefix: "team"}, false, `source.prefix is "team"`},
		{"open policy", Policy{OperatorKey: true}, tunav1.SecretSyncSource{Name: "anything"}, true, ""},
		{"cluster prefix", Policy{OperatorKey: true, Prefix: "prod/{namespace}/"}, tunav1.SecretSyncSource{Name: "prod/team-a/db"}, true, ""},
		{"operator key off", Policy{Prefix: "{namespace}/"}, tunav1.SecretSyncSource{Name: "team-a/db"}, false, "set spec.apiKeySecretRef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Allowed("team-a", tc.source)
			if tc.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Allowed = %v, want ok=%v with %q", err, tc.ok, tc.msg)
			}
		})
	}
}

func TestChangedAndCovers(t *testing.T) {
	prev := map[string]string{"a/x": "1@1", "a/y": "2@1", "b/z": "1@1", "a/again": "4@1"}
	cur := map[string]string{"a/x": "1@1", "a/y": "3@1", "a/new": "1@2", "a/again": "1@3"}
	got := changed(prev, cur)
	want := map[string]bool{"a/y": true, "a/new": true, "b/z": true, "a/again": true}
	if len(got) != len(want) {
		t.Fatalf("changed = %v, want %v", got, want)
	}
	for _, n := range got {
		if !want[n] {
			t.Fatalf("changed = %v, want %v", got, want)
		}
	}
	if !covers(tunav1.SecretSyncSource{Name: "a/y"}, got) || covers(tunav1.SecretSyncSource{Name: "a/x"}, got) {
		t.Error("covers by name is wrong")
	}
	if !covers(tunav1.SecretSyncSource{Prefix: "b/"}, got) || covers(tunav1.SecretSyncSource{Prefix: "c/"}, got) {
		t.Error("covers by prefix is wrong")
	}
}
