"""Jinja2 kernel templates, shipped as package data (read by cukiln.codegen.render)."""
