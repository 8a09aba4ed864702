package informer

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAListingIsSentWholeBeforeItsObjects(t *testing.T) {
	lease := func(name, kept string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"kept": kept}}}
	}
	events := make(chan Event[*coordinationv1.Lease], 10)
	listing := []any{lease("a", "yes"), lease("left-out", "no"), lease("b", "yes")}

	if err := dummyCache(events, Option{LabelSelector: "kept=yes"}).Replace(listing, "7"); err != nil {
		t.Fatal(err)
	}

	listed := <-events
	if listed.Type != Listed || len(listed.Listing) != 2 || listed.Listing[0].Name != "a" || listed.Listing[1].Name != "b" {
		t.Fatalf("first event %s %v, want the listing of a and b only", listed.Type, listed.Listing)
	}
	for _, name := range []string{"a", "b"} {
		if event := <-events; event.Type != Sync || event.Object.Name != name {
			t.Errorf("event %s %s, want Sync %s", event.Type, event.Object.Name, name)
		}
	}
}

func TestAWatchGoesOnFromWhereTheLastOneEnded(t *testing.T) {
	for _, tc := range []struct {
		option      Option
		from, wants string
	}{
		{Option{}, "", "0"},
		{Option{}, "42", "42"},
		{Option{EnableStreamWatch: true}, "42", "42"},
		{Option{EnableListPager: true}, "", ""},
	} {
		opts := metav1.ListOptions{ResourceVersion: tc.from}
		tc.option.setup(&opts)
		if opts.ResourceVersion != tc.wants {
			t.Errorf("%+v from %q: %q, want %q", tc.option, tc.from, opts.ResourceVersion, tc.wants)
		}
	}
}
