package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// printStructured writes v as indented JSON or YAML.
func printStructured(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	switch format {
	case "json":
		_, err = fmt.Fprintf(w, "%s\n", data)
	case "yaml":
		var y []byte
		if y, err = yaml.JSONToYAML(data); err == nil {
			_, err = w.Write(y)
		}
	default:
		err = fmt.Errorf("unknown output format %q (json, yaml)", format)
	}
	return err
}

func printList(w io.Writer, o *clientOptions, list []api.Cluster) error {
	if o.output != "" && o.output != "table" {
		if list == nil {
			list = []api.Cluster{}
		}
		return printStructured(w, o.output, list)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No clusters.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPLATFORM\tVERSION\tSTATUS\tWORKERS\tAGE")
	for _, c := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", c.Id, specName(c.Spec), c.Platform, c.Version, c.Status,
			c.Nodes.Workers.Ready, c.Nodes.Workers.Total, age(o.now().Sub(c.CreateTime)))
	}
	return tw.Flush()
}

func printCluster(w io.Writer, o *clientOptions, c *api.Cluster) error {
	if o.output != "" {
		return printStructured(w, o.output, c)
	}
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	kubeconfig := "not available until READY"
	switch {
	case c.Kubeconfig != nil && *c.Kubeconfig != "":
		kubeconfig = "available: acm-cluster-sp clusters kubeconfig " + c.Id + " > kubeconfig"
	case c.KubeconfigOmitted != nil && *c.KubeconfigOmitted == api.ClusterKubeconfigOmittedForbidden:
		kubeconfig = "withheld: you may not get clusters/kubeconfig for this id"
	case c.KubeconfigOmitted != nil:
		kubeconfig = "withheld (" + string(*c.KubeconfigOmitted) + ")"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rows := [][2]string{
		{"ID", c.Id},
		{"Name", specName(c.Spec)},
		{"Status", string(c.Status)},
		{"Message", c.StatusMessage},
		{"Platform", fmt.Sprintf("%s (%s)", c.Platform, c.ProvisioningType)},
		{"Version", fmt.Sprintf("%s (OpenShift %s)", c.Version, or(c.OpenshiftVersion, "?"))},
		{"API endpoint", or(c.ApiEndpoint, "-")},
		{"Console", or(c.ConsoleUrl, "-")},
		{"Control plane", fmt.Sprintf("%d/%d ready", c.Nodes.ControlPlane.Ready, c.Nodes.ControlPlane.Total)},
		{"Workers", fmt.Sprintf("%d/%d ready", c.Nodes.Workers.Ready, c.Nodes.Workers.Total)},
		{"Namespace", c.Namespace},
		{"Created", fmt.Sprintf("%s (%s ago)", c.CreateTime.UTC().Format(time.RFC3339), age(o.now().Sub(c.CreateTime)))},
		{"Updated", c.UpdateTime.UTC().Format(time.RFC3339)},
		{"Kubeconfig", kubeconfig},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// age renders a duration the way kubectl does: 45s, 12m, 5h, 3d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// waitFor polls a cluster until it has the wanted status, printing every transition; on a terminal a spinner line
// shows the current state between transitions. FAILED (unless waited for) and the timeout end it with exit code 1.
func waitFor(ctx context.Context, o *clientOptions, w io.Writer, id, want string, timeout, interval time.Duration) error {
	cl, err := o.client()
	if err != nil {
		return err
	}
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	began := o.now()
	deadline := time.After(timeout)
	spin := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	frame := 0
	last, lastMsg := "", ""
	poll := time.NewTicker(interval)
	defer poll.Stop()
	redraw := time.NewTicker(120 * time.Millisecond)
	defer redraw.Stop()
	clear := func() {
		if tty {
			fmt.Fprint(w, "\r\033[K")
		}
	}
	for {
		status, msg := "", ""
		resp, err := cl.GetClusterWithResponse(ctx, id)
		switch {
		case err != nil:
			status, msg = last, "cannot reach the service: "+err.Error()
		case resp.StatusCode() == http.StatusNotFound:
			status, msg = "DELETED", "cluster deleted"
		case resp.JSON200 != nil:
			status, msg = string(resp.JSON200.Status), resp.JSON200.StatusMessage
		default:
			return apiError(resp.StatusCode(), resp.Body)
		}
		if status != last || msg != lastMsg {
			if status != last || !tty {
				clear()
				fmt.Fprintf(w, "%s  %-12s %s\n", o.now().Format("15:04:05"), status, msg)
			}
			last, lastMsg = status, msg
		}
		switch {
		case status == want:
			clear()
			fmt.Fprintf(w, "cluster %s is %s after %s\n", id, want, o.now().Sub(began).Round(time.Second))
			if want == "READY" {
				fmt.Fprintf(w, "kubeconfig: acm-cluster-sp clusters kubeconfig %s > kubeconfig\n", id)
			}
			return nil
		case status == "FAILED" && want != "FAILED":
			clear()
			return exitError{code: 1, msg: fmt.Sprintf("cluster %s FAILED: %s", id, msg)}
		case status == "DELETED" && want != "DELETED":
			clear()
			return exitError{code: 1, msg: fmt.Sprintf("cluster %s was deleted", id)}
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				clear()
				return ctx.Err()
			case <-deadline:
				clear()
				return exitError{code: 1, msg: fmt.Sprintf("timed out after %s; cluster %s is %s (%s)", timeout, id, last, lastMsg)}
			case <-poll.C:
				waiting = false
			case <-redraw.C:
				if tty {
					frame = (frame + 1) % len(spin)
					fmt.Fprintf(w, "\r\033[K%s %-12s %s (%s)", spin[frame], last, truncate(lastMsg, 70), o.now().Sub(began).Round(time.Second))
				}
			}
		}
	}
}

func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
