package translate

// ResponseDiscovery translates a discovery document, recognised by its kind:
//   - APIGroupList (/apis) and APIGroupDiscoveryList (aggregated discovery, apidiscovery.k8s.io v2 and v2beta1):
//     the platform's entry of each mapped standard group is removed and the private group's entry, renamed, takes
//     its position (discovery order is RESTMapper priority); without a platform entry the private entry stays
//     where it is. Renamed: name / metadata.name, versions[].groupVersion, preferredVersion.groupVersion and every
//     responseKind.group;
//   - APIGroup (/apis/<g>): name and groupVersions;
//   - APIResourceList (/apis/<g>/<v>): groupVersion and resources[].group.
//
// A document without needles is returned as is. The caller rewrites the ETag with ResponseETag.
func (t *Translator) ResponseDiscovery(body []byte) (Result, error) {
	if !t.needsResponse(body) {
		return Result{Body: body}, nil
	}
	p := skipWS(body, 0)
	if !validJSON(body) {
		return Result{}, errSyntax("invalid discovery document", p)
	}
	if body[p] != '{' {
		return Result{}, newError(ReasonInvalidDiscovery, p, "a discovery document is an object")
	}
	switch kind := stringMember(body, p, "kind"); kind {
	case "APIGroupList":
		return t.discoveryList(body, p, "groups", sDiscGroup)
	case "APIGroupDiscoveryList":
		return t.discoveryList(body, p, "items", sDiscAgg)
	case "APIGroup":
		return t.rewrite(DirectionResponse, body, sDiscGroup, Context{})
	case "APIResourceList":
		return t.rewrite(DirectionResponse, body, sDiscResources, Context{})
	default:
		return Result{}, newError(ReasonInvalidDiscovery, p, "unexpected discovery kind %q", kind)
	}
}

type discoveryEntry struct {
	start, end int
	group      string
}

func (t *Translator) discoveryList(in []byte, obj int, arrayKey string, entry state) (Result, error) {
	as, ae, ok := memberValue(in, obj, arrayKey)
	if !ok || in[as] != '[' {
		return Result{}, newError(ReasonInvalidDiscovery, obj, "discovery list without %s[]", arrayKey)
	}
	var entries []discoveryEntry
	private := map[string]int{} // private group → entry index
	platform := map[string]bool{}
	for p := skipWS(in, as+1); in[p] != ']'; {
		e, _ := skipValue(in, p, 1) // validated above
		if in[p] != '{' {
			return Result{}, newError(ReasonInvalidDiscovery, p, "a discovery entry is an object")
		}
		g := stringMember(in, p, "name")
		if entry == sDiscAgg {
			if ms, _, ok := memberValue(in, p, "metadata"); ok && in[ms] == '{' {
				g = stringMember(in, ms, "name")
			}
		}
		if t.m.IsPrivate(g) {
			private[g] = len(entries)
		}
		if t.std[g] {
			platform[g] = true
		}
		entries = append(entries, discoveryEntry{p, e, g})
		p = skipWS(in, e)
		if in[p] == ',' {
			p = skipWS(in, p+1)
		}
	}
	out := make([]byte, 0, len(in)+64)
	out = append(out, in[:as]...)
	out = append(out, '[')
	n, dropped := 0, 0
	add := func(e discoveryEntry) error {
		res, err := t.responseUnit(in[e.start:e.end], entry, Context{})
		if err != nil {
			return err
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, res.Body...)
		n++
		return nil
	}
	for _, e := range entries {
		switch {
		case t.std[e.group]: // the platform's entry: its position goes to the private group
			dropped++
			priv, _ := t.m.ToPrivate(e.group)
			if j, ok := private[priv]; ok {
				if err := add(entries[j]); err != nil {
					return Result{}, err
				}
			}
		case t.m.IsPrivate(e.group):
			if std, _ := t.m.ToStandard(e.group); platform[std] {
				continue // placed at the platform entry's position
			}
			if err := add(e); err != nil {
				return Result{}, err
			}
		default:
			if err := add(e); err != nil {
				return Result{}, err
			}
		}
	}
	out = append(out, ']')
	out = append(out, in[ae:]...)
	return Result{Body: out, Translated: true, Changed: true, Dropped: dropped}, nil
}
