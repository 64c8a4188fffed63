"""Renderers: tables for terminals, JSON, traces and pictures. No computation lives here."""
