package scale

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// controlPlanePIDs finds the kube-apiserver serving host and the etcd it
// stores in, by their command lines, so that a phase reports their CPU
// time too: at 10,000 Tunnels the apiserver is the largest user of CPU,
// and what the components cost it is the figure that counts.
func controlPlanePIDs(host string) (apiserver, etcd int, err error) {
	u, err := url.Parse(host)
	if err != nil {
		return 0, 0, err
	}
	cmdlines := map[int][]string{}
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a process that ended meanwhile
		}
		var pid int
		if _, err := fmt.Sscanf(p, "/proc/%d/cmdline", &pid); err == nil {
			cmdlines[pid] = strings.Split(string(b), "\x00")
		}
	}
	etcdURL := ""
	for pid, args := range cmdlines {
		if slices.Contains(args, "--secure-port="+u.Port()) {
			apiserver = pid
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
					etcdURL = v
				}
			}
		}
	}
	for pid, args := range cmdlines {
		if etcdURL != "" && slices.Contains(args, "--listen-client-urls="+etcdURL) {
			etcd = pid
		}
	}
	if apiserver == 0 || etcd == 0 {
		return 0, 0, errors.New("the control plane's processes not found (kube-apiserver --secure-port=" + u.Port() + ", etcd " + etcdURL + ")")
	}
	return apiserver, etcd, nil
}
