"""The dashboard page's static parts (page.html, style.css, *.js), inlined into one self-contained page by
`proposer_api.dashboard_routes`; they are package data, read with importlib.resources."""
