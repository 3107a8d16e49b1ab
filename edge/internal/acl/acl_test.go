package acl

import "testing"

func TestAllowed(t *testing.T) {
	cases := []struct {
		name        string
		allow, deny []string
		addr        string
		want        bool
	}{
		{"empty admits all", nil, nil, "127.0.0.1:1", true},
		{"deny matches", nil, []string{"127.0.0.0/8"}, "127.0.0.5:9", false},
		{"deny other", nil, []string{"10.0.0.0/8"}, "127.0.0.5:9", true},
		{"allow matches", []string{"127.0.0.1/32"}, nil, "127.0.0.1:9", true},
		{"allow misses", []string{"127.0.0.2"}, nil, "127.0.0.1:9", false},
		{"deny wins", []string{"127.0.0.0/8"}, []string{"127.0.0.1"}, "127.0.0.1:9", false},
		{"v4-mapped v6", nil, []string{"127.0.0.1/32"}, "[::ffff:127.0.0.1]:9", false},
		{"v6", []string{"::1/128"}, nil, "[::1]:80", true},
		{"garbage refused", []string{"127.0.0.1/32"}, nil, "nonsense", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Parse(c.allow, c.deny)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.AllowedAddr(c.addr); got != c.want {
				t.Fatalf("AllowedAddr(%q) = %v, want %v", c.addr, got, c.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{"300.0.0.0/8", "127.0.0.1/33", "host.example"} {
		if _, err := Parse([]string{bad}, nil); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}
