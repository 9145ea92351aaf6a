package runtime

import (
	"reflect"
	"testing"
)

func TestTransportSettings(t *testing.T) {
	const v4 = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"
	const v5 = "Open MPI v5.0.7, package: Debian OpenMPI, ident: 5.0.7, repo rev: v5.0.7, Feb 14, 2025"
	for _, c := range []struct {
		name    string
		library string
		env     map[string]string
		want    []KV
		wantErr string
	}{
		{"open mpi 4", v4, nil, []KV{{"OMPI_MCA_btl_vader_eager_limit", "32768"}, {"OMPI_MCA_btl_vader_fbox_size", "32768"}}, ""},
		{"open mpi 5", v5, nil, []KV{{"OMPI_MCA_btl_sm_eager_limit", "32768"}, {"OMPI_MCA_btl_sm_fbox_size", "32768"}}, ""},
		{"on", v4, map[string]string{"SYNCGEN_MPI_TUNING": "on"}, []KV{{"OMPI_MCA_btl_vader_eager_limit", "32768"}, {"OMPI_MCA_btl_vader_fbox_size", "32768"}}, ""},
		{"user's eager limit", v4, map[string]string{"OMPI_MCA_btl_vader_eager_limit": "4096"}, []KV{{"OMPI_MCA_btl_vader_fbox_size", "32768"}}, ""},
		{"user's name of the other component", v5, map[string]string{"OMPI_MCA_btl_vader_fbox_size": "4096"}, []KV{{"OMPI_MCA_btl_sm_eager_limit", "32768"}}, ""},
		{"off", v4, map[string]string{"SYNCGEN_MPI_TUNING": "off"}, nil, ""},
		{"another MPI", "MPICH Version: 4.0.2", nil, nil, ""},
		{"bad value", v4, map[string]string{"SYNCGEN_MPI_TUNING": "0"}, nil, `SYNCGEN_MPI_TUNING="0": want on or off`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := transportSettings(c.library, func(k string) string { return c.env[k] })
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}
