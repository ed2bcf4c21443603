from django.apps import AppConfig


class PlatformsConfig(AppConfig):
    name = "cbweb.platforms"
