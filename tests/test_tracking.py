"""MLflow tracking: how yamblab's experiments present themselves."""

from yamblab.training.tracking import EXPERIMENT_KIND, Tracker

KEY, TRAINING = EXPERIMENT_KIND


def test_experiments_are_tagged_as_model_training(tmp_path):
    """MLflow's UI opens an experiment on the page its kind tag names: yamblab's experiments say
    model training (new ones, and old ones that lack the tag or hold the UI's guess), while a
    kind someone chose in the UI is kept."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    tags = lambda name: client.get_experiment_by_name(name).tags

    Tracker(uri, "fresh")
    assert tags("fresh")[KEY] == TRAINING

    client.create_experiment("old")                                   # made before the tag
    client.create_experiment("guessed", tags={KEY: "genai_development_inferred"})
    client.create_experiment("chosen", tags={KEY: "genai_development"})
    for name in ("old", "guessed", "chosen"):
        Tracker(uri, name)
    assert tags("old")[KEY] == TRAINING and tags("guessed")[KEY] == TRAINING
    assert tags("chosen")[KEY] == "genai_development"
    assert Tracker(uri, "fresh").experiment_id == client.get_experiment_by_name("fresh").experiment_id


def test_the_ui_link_opens_the_experiment_on_its_training_runs(tmp_path):
    """MLflow 3's UI shows an experiment's GenAI pages unless the link asks for model training."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    t = Tracker(uri, "yamblab")
    page = f"#/experiments/{t.experiment_id}?workflowType=machine_learning"
    assert t.ui_command() == f"mlflow ui --backend-store-uri {uri}, then open http://127.0.0.1:5000/{page}"
    t.uri = "http://mlflow:5000/"
    assert t.ui_command().startswith(f"open http://mlflow:5000/{page} ")
