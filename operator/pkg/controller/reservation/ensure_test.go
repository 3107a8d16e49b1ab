package reservation

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// edgeEndpoints is an in-memory account of TCP endpoints for Ensure's
// unit test; taken names one reserved by someone else between the read and
// the create (a race the real edge produces only by chance).
type edgeEndpoints struct {
	have    map[string]*apiwire.TCPEndpoint
	taken   *apiwire.TCPEndpoint
	creates int
}

func (e *edgeEndpoints) get(_ context.Context, alias string) (*apiwire.TCPEndpoint, error) {
	if ep, ok := e.have[alias]; ok {
		return ep, nil
	}
	return nil, &apiwire.APIError{Status: http.StatusNotFound, Code: apiwire.CodeNotFound}
}

func (e *edgeEndpoints) create(owner string) func(context.Context) (*apiwire.TCPEndpoint, error) {
	return func(context.Context) (*apiwire.TCPEndpoint, error) {
		e.creates++
		if e.taken != nil {
			e.have[e.taken.Alias] = e.taken
			return nil, &apiwire.APIError{Status: http.StatusConflict, Code: apiwire.CodeNameTaken}
		}
		ep := &apiwire.TCPEndpoint{Alias: "db", Port: 20001, Sharing: apiwire.Sharing{Owner: owner}}
		e.have["db"] = ep
		return ep, nil
	}
}

func TestEnsure(t *testing.T) {
	const owner = "c1/team"
	for _, tc := range []struct {
		name        string
		have, taken *apiwire.TCPEndpoint
		port        int32 // what the status recorded
		wantAdopted bool
		wantErr     string
		wantCreates int
		wantEvent   string
	}{
		{name: "made anew", wantCreates: 1},
		{name: "recorded but gone on the edge: made again, with a warning", port: 20001, wantCreates: 1,
			wantEvent: "Warning ReservationRecreated TCP endpoint db was deleted on the edge; reserved it again"},
		{name: "found unowned and not recorded: adopted", have: &apiwire.TCPEndpoint{Alias: "db", Port: 20001}, wantAdopted: true},
		{name: "found unowned, recorded as ours: not adopted", port: 20001, have: &apiwire.TCPEndpoint{Alias: "db", Port: 20001}},
		{name: "found with this namespace as owner: taken back", have: &apiwire.TCPEndpoint{Alias: "db", Port: 20001, Sharing: apiwire.Sharing{Owner: owner}}},
		{name: "found with another owner: refused", have: &apiwire.TCPEndpoint{Alias: "db", Port: 20001, Sharing: apiwire.Sharing{Owner: "c1/other"}},
			wantErr: "reserved on the edge by owner c1/other"},
		{name: "reserved meanwhile by another owner: refused", taken: &apiwire.TCPEndpoint{Alias: "db", Port: 20002, Sharing: apiwire.Sharing{Owner: "c2/x"}},
			wantCreates: 1, wantErr: "reserved on the edge by owner c2/x"},
		{name: "reserved meanwhile by hand: adopted", taken: &apiwire.TCPEndpoint{Alias: "db", Port: 20002}, wantCreates: 1, wantAdopted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			require.NoError(t, clientgoscheme.AddToScheme(scheme))
			require.NoError(t, tunav1.AddToScheme(scheme))
			obj := &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db"}, Spec: tunav1.TCPEndpointSpec{Alias: "db"},
				Status: tunav1.TCPEndpointStatus{Port: tc.port}}
			kube := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(obj.DeepCopy()).WithStatusSubresource(obj).Build()
			edge := &edgeEndpoints{have: map[string]*apiwire.TCPEndpoint{}, taken: tc.taken}
			if tc.have != nil {
				edge.have["db"] = tc.have
			}
			rec := events.NewFakeRecorder(4)
			got, adopted, err := Ensure(context.Background(), kube, rec, obj, Ensuring[*tunav1.TCPEndpoint, apiwire.TCPEndpoint]{
				Address: "db", What: "TCP endpoint db", Owner: owner,
				Recorded: func(x *tunav1.TCPEndpoint) bool { return x.Status.Port != 0 },
				Adopted:  func(x *tunav1.TCPEndpoint) bool { return x.Status.Adopted },
				Get:      edge.get, Create: edge.create(owner),
				Sharing: func(x *apiwire.TCPEndpoint) apiwire.Sharing { return x.Sharing },
				Share: func(context.Context, string, string, []string) (*apiwire.TCPEndpoint, error) {
					t.Fatal("nothing to share")
					return nil, nil
				},
			})
			assert.Equal(t, tc.wantCreates, edge.creates, "creates")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.Equal(t, apiwire.CodeAddressOwned, apiwire.CodeOf(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "db", got.Alias)
			assert.Equal(t, tc.wantAdopted, adopted, "adopted")
			select {
			case ev := <-rec.Events:
				assert.Equal(t, tc.wantEvent, ev)
			default:
				assert.Empty(t, tc.wantEvent, "no event was recorded")
			}
		})
	}
}
