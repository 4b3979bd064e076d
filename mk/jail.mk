# The jail the agent frontend runs model-written programs in (solar_io/frontends/agent/jail.py):
# bubblewrap (bwrap) and libseccomp (used through pyseccomp, in the dev and llm extras).
# As root with apt-get, installs what is missing; otherwise prints how. Without the jail the agent
# frontend refuses to run translated programs (`--unsafe-exec` overrides) and the jail's tests skip.
# Included from the Makefile: `include mk/jail.mk`; `make venv` (so `make test`) runs it.

.PHONY: jail

jail:
	@if command -v bwrap >/dev/null 2>&1 && /sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2 '; then \
	  :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing the agent jail: apt-get install bubblewrap libseccomp2"; \
	  { apt-get install -y -qq bubblewrap libseccomp2 >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap libseccomp2 >/dev/null; }; } || \
	  echo "could not install bubblewrap: the agent frontend will refuse translated programs (see README: Security)"; \
	else \
	  echo "the agent jail needs bubblewrap and libseccomp: run 'sudo apt-get install bubblewrap libseccomp2'" \
	       "(Fedora: dnf install bubblewrap libseccomp); until then the agent frontend refuses translated programs"; \
	fi

venv: jail
